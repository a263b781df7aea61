# SPDX-License-Identifier: Apache-2.0
"""The torch.distributed backend "conflux": every ProcessGroup operation at 1 to 4 ranks (torch_checks.py) and DDP
at 2 ranks against a single-process run (ddp_checks.py), ranks started as torchrun starts them."""
from __future__ import annotations

import importlib.util
import os

import pytest

pytest.importorskip("torch")
if importlib.util.find_spec("conflux._torch_backend") is None:
    pytest.fail("the extension conflux._torch_backend is not built: run `make python-ext` (PyTorch is installed, so "
                "the backend must be tested)", pytrace=False)

import torch_checks  # noqa: E402

CHECKS = [name for name in dir(torch_checks) if name.startswith("check_")]


@pytest.mark.parametrize("check,world", [(c, w) for w in (1, 2, 3, 4) for c in CHECKS])
def test_torch_backend(launches, check, world):
    launches.assert_check("torch_checks", world, CHECKS, check)


DDP_CHECKS = ["check_ddp_matches_single_process", "check_ddp_on_shared_host_memory"]


@pytest.mark.parametrize("check", DDP_CHECKS)
def test_ddp_matches_single_process(launches, check):
    launches.assert_check("ddp_checks", 2, DDP_CHECKS, check)

# SPDX-License-Identifier: Apache-2.0
"""Every function of the conflux package at 1 to 4 ranks, each rank a process started as torchrun would start it,
against numpy references (binding_checks.py). The torch CPU tensor path runs at 2 ranks only: importing torch costs
each rank seconds on a busy 2-core machine, and the calls beneath are the ones the numpy checks cover."""
from __future__ import annotations

import importlib.util

import pytest

import binding_checks

NUMPY_CHECKS = [name for name in dir(binding_checks) if name.startswith("check_") and "torch" not in name]
HAVE_TORCH = importlib.util.find_spec("torch") is not None


def checks_for(world: int) -> list[str]:
    return NUMPY_CHECKS + (["check_torch_tensors"] if HAVE_TORCH and world == 2 else [])


@pytest.mark.parametrize("check,world", [(c, w) for w in (1, 2, 3, 4) for c in checks_for(w)])
def test_binding(launches, check, world):
    launches.assert_check("binding_checks", world, checks_for(world), check)

# SPDX-License-Identifier: Apache-2.0
"""A rank SIGKILLed mid-job: the survivors get an exception naming it, not a hang (fault_checks.py), through the
binding and through the torch backend. The launcher's timeout is the hang detector."""
from __future__ import annotations

import importlib.util

import pytest

import launcher


def run(check: str) -> None:
    results = launcher.launch(3, "fault_checks", [check], timeout=120)
    survivors, killed = results[:-1], results[-1]
    bad = [r for r in survivors if r.returncode != 0 or r.checks.get(check) != "ok"]
    if bad or killed.returncode != -9:
        pytest.fail(f"{check}:\n" + launcher.summary(results), pytrace=False)


def test_binding_survivors_get_remote_error():
    run("check_binding_survivors_get_remote_error")


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed")
def test_torch_survivors_get_an_exception():
    run("check_torch_survivors_get_an_exception")

# SPDX-License-Identifier: Apache-2.0
"""pytest setup: the package from this checkout (python/), and one launch per (checks module, rank count) shared by
every test that reads its results."""
from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import launcher  # noqa: E402


class Launches:
    def __init__(self) -> None:
        self._cache: dict = {}

    def results(self, module: str, world: int, checks: list[str], **kwargs):
        key = (module, world)
        if key not in self._cache:
            self._cache[key] = launcher.launch(world, module, checks, **kwargs)
        return self._cache[key]

    def assert_check(self, module: str, world: int, checks: list[str], name: str, **kwargs) -> None:
        results = self.results(module, world, checks, **kwargs)
        bad = [f"rank {r.rank}: {r.checks.get(name, 'no result (the rank stopped before this check)')}"
               for r in results if r.checks.get(name) != "ok"]
        if bad:
            pytest.fail(f"{name} at {world} ranks:\n" + "\n".join(bad) + "\n" + launcher.summary(results),
                        pytrace=False)


@pytest.fixture(scope="session")
def launches() -> Launches:
    return Launches()

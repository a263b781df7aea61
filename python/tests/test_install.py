# SPDX-License-Identifier: Apache-2.0
"""`pip install ./python` as python/README.md gives it, with nothing from the network (--no-index), into a folder of
its own; the installed copy, imported away from the checkout, runs a collective. The torch backend is left out
(CFX_TORCH_BACKEND=0): compiling it takes minutes, and `make python-ext` builds the same sources for the other tests."""
from __future__ import annotations

import os
import subprocess

import launcher

PACKAGE = os.path.dirname(launcher.HERE)
PROBE = """
import sys, numpy as np, conflux, conflux._install_info as info
assert conflux.__file__.startswith(sys.argv[1]), conflux.__file__
assert any(p.endswith("build/src/libnccl.so.2") for p in info.LIBRARY_CANDIDATES), info.LIBRARY_CANDIDATES
with conflux.Communicator.from_unique_id(conflux.UniqueId.generate(), 0, 1) as comm:
    x = np.arange(5, dtype=np.float32)
    comm.all_reduce(x)
    assert x.tolist() == [0, 1, 2, 3, 4], x
print("installed ok", conflux.version())
"""


def test_pip_install_without_network(tmp_path):
    site = str(tmp_path / "site")
    env = dict(os.environ, CFX_TORCH_BACKEND="0", PIP_DISABLE_PIP_VERSION_CHECK="1")
    pip = subprocess.run([launcher.PYTHON, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", site, PACKAGE], env=env, capture_output=True, text=True,
                         timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    env["PYTHONPATH"] = site  # and not the checkout: the probe runs from elsewhere
    probe = subprocess.run([launcher.PYTHON, "-c", PROBE, site], env=env, cwd=str(tmp_path), capture_output=True,
                           text=True, timeout=120)
    assert probe.returncode == 0 and "installed ok" in probe.stdout, probe.stdout + probe.stderr

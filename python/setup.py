# SPDX-License-Identifier: Apache-2.0
"""Builds the `conflux` package: the ctypes binding (pure Python) and, where PyTorch is installed, the
torch.distributed backend extension conflux._torch_backend (C++, built against that PyTorch).

    pip install ./python                      # from a checkout; see python/README.md
    python3 setup.py build_ext --inplace      # the extension beside the sources (make python-ext)

There is deliberately no pyproject.toml: pip then builds in this environment, where the installed PyTorch (which the
extension must be compiled against) and setuptools are, instead of fetching a fresh build environment from a
package index. Environment:
    CFX_TORCH_BACKEND=0   skip the extension even where PyTorch is installed
    CFX_INCLUDE=DIR       the folder holding conflux.h and nccl.h (default: the checkout's include/, else the
                          compiler's search path, where an installed Conflux puts them)
"""
from __future__ import annotations

import os
import pathlib

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent
CHECKOUT = HERE.parent if (HERE.parent / "include" / "conflux.h").is_file() else None


class BuildPyWithInstallInfo(build_py):
    """Records where the checkout's library was at install time, for a package installed away from the checkout."""

    def run(self) -> None:
        super().run()
        candidates = [str(CHECKOUT / "build" / "src" / "libnccl.so.2")] if CHECKOUT else []
        target = pathlib.Path(self.build_lib) / "conflux" / "_install_info.py"
        target.write_text("# Written by setup.py at install time: where the Conflux library was then.\n"
                          f"LIBRARY_CANDIDATES = {candidates!r}\n")


def torch_extension() -> tuple[list, dict]:
    if os.environ.get("CFX_TORCH_BACKEND", "1") == "0":
        return [], {}
    try:
        from torch.utils.cpp_extension import BuildExtension, CppExtension
    except ImportError:
        return [], {}
    include = os.environ.get("CFX_INCLUDE") or (str(CHECKOUT / "include") if CHECKOUT else None)
    sources = sorted(str(p.relative_to(HERE)) for p in (HERE / "csrc").glob("*.cc"))
    ext = CppExtension("conflux._torch_backend", sources, include_dirs=[include] if include else [],
                       extra_compile_args=["-O2", "-std=c++17", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                           "-Wno-deprecated-declarations"], libraries=["dl"])
    return [ext], {"build_ext": BuildExtension.with_options(no_python_abi_suffix=False)}


ext_modules, cmdclass = torch_extension()
cmdclass["build_py"] = BuildPyWithInstallInfo

setup(
    name="conflux",
    version="0.1.0",
    description="Python binding of the Conflux collective-communication library, and its torch.distributed backend",
    license="Apache-2.0",
    packages=["conflux", "conflux.torch"],
    package_data={"conflux": ["py.typed"]},
    python_requires=">=3.9",
    install_requires=["numpy"],
    ext_modules=ext_modules,
    cmdclass=cmdclass,
    zip_safe=False,
)

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs the commands of docs/USER_GUIDE.md as written.

Every ```sh block of the guide runs, in order, in one bash session (so a variable set in one block, such as
PREFIX, holds in the next), with `set -euo pipefail`, from a copy of the top of the source tree whose `build`
is the build directory under test. A block preceded by the line
    <!-- ci: skip: <reason> -->
is not run (the reason is printed; a marker without one is an error); one preceded by
    <!-- ci: fails -->
must exit non-zero (the guide shows an error on purpose). A ```c or ```cpp block preceded by
    <!-- quote: <path> -->
must appear verbatim in that file, so the guide quotes the examples instead of keeping copies of them.

What differs from a user's shell is only the environment, never a command: HOME is an empty temporary directory
(so "$HOME/conflux" is a fresh prefix), Open MPI may run as root and stays on loopback, and Conflux uses
loopback (NCCL_SOCKET_IFNAME=lo).

    run_guide.py GUIDE SOURCE_DIR BUILD_DIR
Exit status 0 when every block behaved; prints "guide: N blocks run, M skipped".
"""
import os
import re
import subprocess
import sys
import tempfile

MARKER = re.compile(r"<!--\s*(ci|quote):\s*(.*?)\s*-->")


def blocks(text):
    """Yields (line number, language, body, marker kind, marker text) for each fenced block."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m or not m.group(1):
            i += 1
            continue
        lang, start = m.group(1), i
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        body = "\n".join(lines[i + 1:j])
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        marker = MARKER.search(lines[k]) if k >= 0 else None
        yield start + 1, lang, body, marker.group(1) if marker else None, marker.group(2) if marker else None
        i = j + 1


def main():
    guide, src, build = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    text = open(guide).read()
    failures = []
    script = ["set -euo pipefail"]
    run = skipped = 0
    for line, lang, body, kind, what in blocks(text):
        if kind == "quote":
            path = os.path.join(src, what)
            if not os.path.exists(path) or body not in open(path).read():
                failures.append(f"line {line}: this {lang} block is not a verbatim part of {what}")
            continue
        if lang != "sh":
            continue
        if kind == "ci" and what.startswith("skip"):
            reason = what[len("skip"):].lstrip(": ").strip()
            if not reason:
                failures.append(f"line {line}: a skipped block must say why")
            print(f"skipped block at line {line}: {reason}")
            skipped += 1
            continue
        run += 1
        script.append(f"echo '=== guide line {line}'")
        if kind == "ci" and what == "fails":
            script.append(f"if ( set -euo pipefail\n{body}\n); then echo 'FAIL: guide line {line} should fail'; "
                          "exit 1; fi")
        else:
            script.append(body)
    script.append("echo '=== guide: every block ran'")
    if failures:
        print("\n".join(failures))
        return 1

    with tempfile.TemporaryDirectory() as tmp:
        tree = os.path.join(tmp, "tree")
        os.makedirs(tree)
        for entry in os.listdir(src):
            if entry in (".git",) or entry.startswith("build"):
                continue
            os.symlink(os.path.join(src, entry), os.path.join(tree, entry))
        os.symlink(build, os.path.join(tree, "build"))
        home = os.path.join(tmp, "home")
        os.makedirs(home)
        env = dict(os.environ, HOME=home, NCCL_SOCKET_IFNAME="lo", OMPI_ALLOW_RUN_AS_ROOT="1",
                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader",
                   OMPI_MCA_btl_tcp_if_include="lo", OMPI_MCA_oob_tcp_if_include="lo",
                   OMPI_MCA_rmaps_base_oversubscribe="1")
        # A user's shell has none of these; make's jobserver variables would reach the guide's `make package`.
        for var in ("PREFIX", "PKG_CONFIG_PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "NCCL_DEBUG", "MAKEFLAGS", "MFLAGS",
                    "MAKELEVEL"):
            env.pop(var, None)
        result = subprocess.run(["bash", "-c", "\n".join(script)], cwd=tree, env=env)
    print(f"guide: {run} blocks run, {skipped} skipped")
    return 0 if result.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

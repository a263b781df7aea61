#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plants layer violations in a temporary copy of src/ and expects tools/check_layers.py to reject each one.

The checker once took the folder path up to the last slash as the included layer ("transport/tcp" for
"transport/tcp/tcp_connection.h"), found no such layer and let the include pass: every include of a file in a
subfolder (transport/*, primitives/device) went unchecked. Each case below is an edge that must fail, one per
copy, so a case that passes cannot hide behind another that fails."""
import pathlib
import shutil
import subprocess
import sys
import tempfile

repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)

# (file to create under src/, include line, what the checker must say)
CASES = [
    ("common/planted.h", '#include "transport/tcp/tcp_connection.h"', "src/common may not include src/transport"),
    ("transport/tcp/planted.cc", '#include "core/communicator.h"', "src/transport may not include src/core"),
    ("transport/planted.cc", '#include "primitives/device/planted.h"', "src/transport may not include src/primitives"),
    ("faulttol/planted.cc", '#  include "transport/bootstrap/bootstrap.h"', "src/faulttol may not include src/transport"),
    ("core/planted.cc", '#include "transport/shm/shm_transport.h"', "src/core may not include a concrete transport"),
    ("api/planted.cc", '#include "transport/cuda_ipc/vmm_memory.h"', "src/api may not include a concrete transport"),
    ("api/planted.cc", '#include "faulttol/member_master.h"', "src/api may not include src/faulttol"),
]


def run(root):
    return subprocess.run([sys.executable, str(root / "tools" / "check_layers.py")], capture_output=True, text=True)


def copy(tmp):
    root = pathlib.Path(tmp)
    shutil.copytree(repo / "src", root / "src")
    (root / "tools").mkdir()
    shutil.copy(repo / "tools" / "check_layers.py", root / "tools")
    return root


failures = []
with tempfile.TemporaryDirectory() as tmp:
    clean = run(copy(tmp))
    if clean.returncode != 0:
        failures.append(f"the unchanged copy fails:\n{clean.stdout}{clean.stderr}")
for path, line, expected in CASES:
    with tempfile.TemporaryDirectory() as tmp:
        root = copy(tmp)
        (root / "src" / path).write_text(f"// planted by check_layers_test.py\n{line}\n")
        r = run(root)
        where = f"src/{path}:2: "
        if r.returncode == 0 or (where + expected) not in r.stdout:
            failures.append(f"{path} with {line!r}: expected exit 1 and '{where}{expected}', got exit "
                            f"{r.returncode}:\n{r.stdout}{r.stderr}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"check_layers_test: the clean copy passes and all {len(CASES)} planted violations are rejected")

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Rejects #include edges that go upward between src/ layers, and exported functions that bypass api::call.

The allowed edges are read from the CFX_LAYER_EDGES block of src/CMakeLists.txt, so the build and this check
share one table."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
src = root / "src"
text = (src / "CMakeLists.txt").read_text()
block = text.split("# CFX_LAYER_EDGES", 1)[1].split("# END_CFX_LAYER_EDGES", 1)[0]
allowed = {}
for line in block.splitlines():
    m = re.match(r"#\s+(\w+):\s*(.*)", line)
    if m:
        deps = m.group(2).strip()
        allowed[m.group(1)] = set() if deps.startswith("(none)") else set(deps.split())

errors = []
# Above the transport layer, core/ and api/ reach transports only through transport/'s own headers (transport.h, the
# transport set, device_ipc.h, peer_memory.h, ...) and the bootstrap, which moves no data: which transport connects
# which pair is the transport layer's business (docs/DESIGN.md, "The communicator").
NO_CONCRETE_TRANSPORT = {"core", "api"}
TRANSPORT_FRONTS = {"bootstrap"}
concrete_re = re.compile(r'^\s*#\s*include\s+"transport/(\w+)/[^"]+"')
# The included layer is the first folder of the path: "transport/tcp/tcp_connection.h" is in src/transport.
include_re = re.compile(r'^\s*#\s*include\s+"(\w+)/[^"]+"')
for path in sorted(src.rglob("*")):
    if path.suffix not in {".h", ".cc", ".c", ".cu", ".inc"}:
        continue
    layer = path.relative_to(src).parts[0]
    if layer not in allowed:
        errors.append(f"{path.relative_to(root)}: folder src/{layer} is not a layer in src/CMakeLists.txt")
        continue
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        m = include_re.match(line)
        if not m:
            continue
        target = m.group(1)
        if target in allowed and target != layer and target not in allowed[layer]:
            errors.append(f"{path.relative_to(root)}:{n}: src/{layer} may not include src/{target} (upward or sideways)")
        folder = concrete_re.match(line)
        if layer in NO_CONCRETE_TRANSPORT and folder and folder.group(1) not in TRANSPORT_FRONTS:
            errors.append(f"{path.relative_to(root)}:{n}: src/{layer} may not include a concrete transport "
                          f"(transport/{folder.group(1)}/): use transport/'s own headers (the interface, the transport "
                          f"set, the device and memory fronts)")

# Every exported entry point in src/api goes through api::call so no exception crosses the C ABI.
for path in sorted((src / "api").glob("*.cc")):
    body = path.read_text()
    for m in re.finditer(r"CFX_API\s+[^{;]*?\b(p?nccl\w+|cfx\w+)\s*\([^)]*\)\s*\{", body, re.S):
        start = m.end()
        depth, i = 1, start
        while depth and i < len(body):
            depth += {"{": 1, "}": -1}.get(body[i], 0)
            i += 1
        fn = body[start:i]
        # Allowed besides api::call: the noexcept not-supported helpers, and bodies that cannot throw (a
        # switch over result codes, reading or resetting the log state).
        safe = ("api::call(", "notSupported(", "warnNotSupported(", "emptyTeam(", "noRank(", "switch (api::rawEnum(result))", "log::lastError()",
                "log::reset()")
        if not any(s in fn for s in safe):
            errors.append(f"{path.relative_to(root)}: {m.group(1)} does not go through api::call")

if errors:
    print("\n".join(errors))
    sys.exit(1)
print(f"check_layers: {len(allowed)} layers, include edges and api::call boundaries OK")

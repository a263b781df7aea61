#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Project hygiene a new user checks first.

- Every SPDX-License-Identifier tag in the tree names the license that LICENSE holds (Apache-2.0).
- Every document a Markdown file of the repository points to exists: relative links [text](path), and paths in
  backticks that name a document (`docs/ENV.md`, `README.md`), taken relative to the file or to the top of the tree.
- CHANGELOG.md, docs/VERSIONING.md and the guide's "Compatibility and limitations" section exist.

    docs_test.py SOURCE_DIR
    docs_test.py --self-test     plants a wrong SPDX tag and a dangling reference, and expects both caught
"""
import os
import re
import subprocess
import sys


def tracked(src):
    out = subprocess.run(["git", "ls-files"], cwd=src, capture_output=True, text=True)
    if out.returncode == 0 and out.stdout.strip():
        return out.stdout.split()
    files = []  # not a git checkout (a source tarball): walk it
    for root, dirs, names in os.walk(src):
        dirs[:] = [d for d in dirs if not d.startswith(("build", "."))]
        files += [os.path.relpath(os.path.join(root, n), src) for n in names]
    return files


def check(src):
    """The failures found in the tree at src."""
    failures = []
    files = tracked(src)

    license_text = open(os.path.join(src, "LICENSE")).read()
    if "Apache License" not in license_text or "Version 2.0, January 2004" not in license_text:
        failures.append("LICENSE is not the Apache License 2.0 text")
    tags = 0
    for f in files:
        try:
            head = open(os.path.join(src, f), errors="replace").read(2000)
        except (IsADirectoryError, FileNotFoundError):
            continue
        for tag in re.findall(r"SPDX-License-Identifier:\s*([A-Za-z0-9.\-+]+)", head):
            tags += 1
            if tag != "Apache-2.0":
                failures.append(f"{f}: SPDX tag {tag}, but LICENSE is Apache-2.0")

    links = 0
    for f in files:
        if not f.endswith(".md"):
            continue
        text = open(os.path.join(src, f)).read()
        here = os.path.dirname(f)
        targets = [m for m in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", m)]
        # Paths in backticks that name a document (`docs/ENV.md`, `VERSIONING.md`), not an output file (`summary.md`).
        targets += [m for m in re.findall(r"`([\w./-]+\.md)`", text) if "/" in m or re.match(r"[A-Z_]+\.md$", m)]
        for target in targets:
            path = target.split("#")[0]
            if not path:
                continue
            links += 1
            if not any(os.path.exists(os.path.join(src, base, path)) for base in (here, "")):
                failures.append(f"{f}: points to {target}, which is not in the repository")

    for must in ("CHANGELOG.md", "docs/VERSIONING.md", "docs/USER_GUIDE.md"):
        if not os.path.exists(os.path.join(src, must)):
            failures.append(f"{must} is missing")
    if "## 11. Compatibility and limitations" not in open(os.path.join(src, "docs/USER_GUIDE.md")).read():
        failures.append("the guide has no 'Compatibility and limitations' section")

    print(f"docs: {tags} SPDX tags and {links} document references checked, {len(failures)} failed")
    return failures


def self_test():
    import shutil
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        here = os.path.dirname(os.path.abspath(__file__))
        src = os.path.join(here, "..", "..")
        os.makedirs(os.path.join(tmp, "docs"))
        shutil.copy(os.path.join(src, "LICENSE"), tmp)
        for f in ("CHANGELOG.md", "docs/VERSIONING.md", "docs/USER_GUIDE.md"):
            shutil.copy(os.path.join(src, f), os.path.join(tmp, f))
        open(os.path.join(tmp, "a.c"), "w").write("/* SPDX-License-Identifier: MIT */\n")
        open(os.path.join(tmp, "docs", "x.md"), "w").write("See [the plan](PLAN.md) and `docs/ROADMAP.md`.\n")
        found = [f for f in check(tmp) if "a.c" in f or "docs/x.md" in f]
    ok = len(found) == 3
    print("self-test:", "caught the planted tag and both references" if ok else f"missed some: {found}")
    return 0 if ok else 1


def main():
    if sys.argv[1] == "--self-test":
        return self_test()
    failures = check(os.path.abspath(sys.argv[1]))
    print("\n".join(f"FAIL: {x}" for x in failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

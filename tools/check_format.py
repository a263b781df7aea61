#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the C and C++ sources against .clang-format with clang-format 14 (Debian 12's `clang-format` package).

Every source file is checked except those listed in tools/format_legacy.txt: files written before the check
existed, which clang-format would still change. Those get reformatted one at a time (taken off the list in the same
commit) rather than in one tree-wide change. New files are checked from their first commit. A listed file that
already passes is reported, so the list only shrinks.

    python3 tools/check_format.py            # exit 1 on a file that needs formatting
    python3 tools/check_format.py --fix      # reformat the checked files in place
"""
import concurrent.futures
import os
import pathlib
import shutil
import subprocess
import sys

root = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = ("src", "include", "tests", "perf", "tools", "examples", "python/csrc")
SUFFIXES = {".h", ".cc", ".c", ".cpp", ".cu", ".hip"}
# One clang-format version for everyone: another version formats some constructs differently.
BINARY = "clang-format-14"


def sources():
    try:
        listed = subprocess.run(["git", "ls-files", "--", *FOLDERS], cwd=root, check=True, capture_output=True,
                                text=True).stdout.split()
        paths = [root / p for p in listed]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an unpacked source tarball)
        paths = [p for f in FOLDERS for p in (root / f).rglob("*")]
    return sorted(p for p in paths if p.suffix in SUFFIXES and p.is_file())


def format_one(path):
    """The file's path, its name from the root, its text and what clang-format makes of it."""
    rel = path.relative_to(root).as_posix()
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    formatted = subprocess.run([BINARY, f"--assume-filename={rel}", "--style=file"], cwd=root, input=text,
                               capture_output=True, text=True, encoding="utf-8", errors="surrogateescape",
                               check=True).stdout
    return path, rel, text, formatted


def main():
    fix = "--fix" in sys.argv[1:]
    if shutil.which(BINARY) is None:
        sys.exit(f"check_format: {BINARY} not found (Debian package clang-format; `make deps` installs it)")
    legacy_file = root / "tools" / "format_legacy.txt"
    legacy = {line.strip() for line in legacy_file.read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    checked, now_clean, bad = 0, [], []
    # One clang-format per file, as many at a time as there are CPUs: the run is mostly process start-up, which
    # took make test 20 s one file after another.
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(format_one, sources()))
    for path, rel, text, formatted in results:
        if rel in legacy:
            if formatted == text:
                now_clean.append(rel)
            continue
        checked += 1
        if formatted != text:
            if fix:
                path.write_text(formatted, encoding="utf-8", errors="surrogateescape")
            else:
                bad.append(rel)
    for rel in now_clean:
        print(f"check_format: {rel} is formatted now: take it off tools/format_legacy.txt")
    if bad:
        for rel in bad:
            print(f"check_format: {rel} differs from clang-format's output (python3 tools/check_format.py --fix)")
        sys.exit(1)
    print(f"check_format: {checked} files formatted as .clang-format says ({len(legacy)} legacy files not checked)")


if __name__ == "__main__":
    main()

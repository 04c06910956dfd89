#!/usr/bin/env python3
"""Every repository path named in the tracked sources and docs exists: a word such as
`kernels/examples/scale_add/scale_add.cu` in a comment, a doc or a message must name a tracked file
or folder, so that moving a file cannot leave readers pointed at nothing.

A word is checked when it names a file (its last part has a source or doc extension) and
starts at one of the repository's top-level folders (`docs/…`, `kernels/…`, …). It exists when
it is tracked relative to the repository, to the naming file's folder or one above it, or as the
tail of a tracked path (an include such as `zerojit/kernel.hpp`). Other words with slashes are
examples (`mylib/kernels.py`), build outputs or other projects' files, and are left alone, as
are the names embedded sources are given (`make_program`, `EmbeddedFile`).
    scripts/check_paths.py            (from anywhere; exit 0 clean, 1 with each stale path named)
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = re.compile(r"(\.(cpp|hpp|h|cu|cuh|py|pyi|md|sh|cmake|txt|toml|in)|CMakeLists\.txt|/run)$")
PATH = re.compile(r"(?<![\w./<>{}$*-])([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.<>-]+)+)")


def tracked_paths():
    listed = subprocess.run(
        ["git", "-C", ROOT, "ls-files"], capture_output=True, text=True, check=True
    ).stdout.split()
    paths = set(listed)
    for name in listed:
        parent = os.path.dirname(name)
        while parent:
            paths.add(parent)
            parent = os.path.dirname(parent)
    return listed, paths


FILE = re.compile(r"\.(cpp|hpp|h|cu|cuh|py|pyi|md|sh|cmake|json|toml)$")


def exists(word, naming_file, paths, tails):
    if "<" in word:  # a pattern such as kernels/dsv4/<kernel>/gate.cpp: its fixed prefix
        prefix = word[: word.index("<")].rstrip("/")
        return prefix in paths
    folder = os.path.dirname(naming_file)
    while True:
        if os.path.normpath(os.path.join(folder, word)) in paths:
            return True
        if not folder:
            return word in tails
        folder = os.path.dirname(folder)


def main():
    listed, paths = tracked_paths()
    top = {name.split("/")[0] for name in listed if "/" in name}
    tails = {name.split("/", depth)[-1] for name in listed for depth in range(name.count("/"))}
    stale = []
    for name in listed:
        if not TEXT.search(name):
            continue
        try:
            with open(os.path.join(ROOT, name), encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for number, line in enumerate(lines, 1):
            if "EmbeddedFile" in line or "make_program" in line or "://" in line:
                continue
            for match in PATH.finditer(line):
                word = match.group(1)
                if (
                    FILE.search(word)
                    and word.split("/")[0] in top
                    and not exists(word, name, paths, tails)
                ):
                    stale.append(f"{name}:{number}: {word}")
    for entry in stale:
        print(entry)
    if stale:
        print(f"{len(stale)} paths name nothing tracked (moved or renamed?)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Refuse a commit that edits the generated sync twin without its async source (a pre-commit hook).

    python scripts/check_twin_edits.py            # checks what `git diff --cached` stages
    python scripts/check_twin_edits.py FILE...    # checks these paths as if they were the staged set

Every file under ``src/openenv/_sync/`` and ``tests/_sync/`` is generated from the
same path under ``_async/`` by ``scripts/run_unasync.py``.  A staged generated file
whose source is not staged too is a hand edit that the next regeneration throws
away, so the commit is refused (pymongo's synchro hook does the same).  Staging
the generator itself (``scripts/run_unasync.py``, whose token table can change
every output) allows any generated file.  Whether the twin is up to date is the
other hook's job (``run_unasync.py --check``).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

#: (hand-written async tree, generated sync tree): the same pairs as scripts/run_unasync.py's TREES
TREES: tuple[tuple[str, str], ...] = (
    ("src/openenv/_async", "src/openenv/_sync"),
    ("tests/_async", "tests/_sync"),
)
GENERATOR = "scripts/run_unasync.py"


def source_of(path: str) -> str | None:
    """The async source a generated path comes from, or ``None`` for a path outside the generated trees."""
    for source_tree, generated_tree in TREES:
        if path.startswith(generated_tree + "/"):
            return source_tree + path[len(generated_tree) :]
    return None


def problems(staged: Iterable[str]) -> list[str]:
    """One line per staged generated file whose async source is not staged (empty: the commit may go on)."""
    paths = {Path(p).as_posix().removeprefix("./") for p in staged}
    if GENERATOR in paths:
        return []
    found = []
    for path in sorted(paths):
        source = source_of(path)
        if source is not None and source not in paths:
            found.append(f"{path} is generated from {source}, which this commit does not change")
    return found


def staged_files() -> list[str]:
    """The paths in the index that differ from HEAD (added, changed, renamed or deleted)."""
    out = subprocess.run(
        ["git", "diff", "--cached", "--name-only", "--no-renames", "-z"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [name for name in out.split("\0") if name]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    found = problems(args if args else staged_files())
    if not found:
        return 0
    print("refused: the generated sync twin is edited without its async source:", file=sys.stderr)
    for line in found:
        print(f"  {line}", file=sys.stderr)
    print(
        "Edit the _async file instead, run `nox -s unasync` (or python scripts/run_unasync.py), "
        "and commit both trees together (CONTRIBUTING.md, 'The twin rule').",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())

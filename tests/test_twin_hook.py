"""scripts/check_twin_edits.py, the pre-commit hook that refuses hand edits of the generated twin."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "check_twin_edits.py"


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hook = _load(SCRIPT)


def test_a_generated_file_alone_is_refused() -> None:
    assert hook.problems(["src/openenv/_sync/env.py"]) == [
        "src/openenv/_sync/env.py is generated from src/openenv/_async/env.py, which this commit does not change"
    ]
    assert len(hook.problems(["tests/_sync/test_pool.py", "README.md"])) == 1


def test_a_generated_file_with_its_source_passes() -> None:
    assert hook.problems(["src/openenv/_async/env.py", "src/openenv/_sync/env.py"]) == []
    assert hook.problems(["tests/_async/test_pool.py", "tests/_sync/test_pool.py", "./README.md"]) == []
    # another source does not excuse it
    assert hook.problems(["src/openenv/_async/pool.py", "src/openenv/_sync/env.py"]) != []


def test_the_generator_itself_may_change_every_output() -> None:
    assert hook.problems(["scripts/run_unasync.py", "src/openenv/_sync/env.py", "tests/_sync/test_env.py"]) == []


def test_paths_outside_the_generated_trees_pass() -> None:
    assert hook.problems(["src/openenv/_core/pool.py", "tests/test_core.py", "src/openenv/sync.py"]) == []


def test_trees_are_the_generators() -> None:
    sys.modules.pop("run_unasync", None)
    generator = _load(REPO / "scripts" / "run_unasync.py")
    assert hook.TREES == generator.TREES
    assert hook.GENERATOR == generator.SCRIPT


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_hook_reads_the_index_of_a_real_repository(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    for rel in ("src/openenv/_async/env.py", "src/openenv/_sync/env.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    git("add", "src/openenv/_sync/env.py")
    run = [sys.executable, str(SCRIPT)]
    refused = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True)
    assert refused.returncode == 1
    assert "src/openenv/_sync/env.py is generated from src/openenv/_async/env.py" in refused.stderr
    git("add", "src/openenv/_async/env.py")
    assert subprocess.run(run, cwd=tmp_path, capture_output=True, text=True).returncode == 0


def test_pre_commit_runs_both_hooks() -> None:
    config = (REPO / ".pre-commit-config.yaml").read_text(encoding="utf-8")
    assert "entry: python scripts/check_twin_edits.py" in config
    assert "entry: python scripts/run_unasync.py --check" in config
    assert "unasync==0.6.0" in config

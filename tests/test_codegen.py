"""Tests of the sync-twin generator itself (scripts/run_unasync.py).

Every test works on a throwaway tree under ``tmp_path`` (``--root``); the real
``src/openenv/_sync`` and ``tests/_sync`` are never read or written here.
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "run_unasync.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_unasync", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _load_script()
with warnings.catch_warnings():  # unasync imports setuptools, which may warn on import
    warnings.simplefilter("ignore")
    unasync = importlib.import_module("unasync")

MARKER = gen.MARKER

# A table that the sample tree below uses completely.
TABLE = {
    "_shim_async": "_shim_sync",
    "AsyncExitStack": "ExitStack",
    "aclose": "close",
    "aio": "sync",
}

ENV_SRC = f'''{MARKER}
"""A small client: enter it, use it, close it."""

from contextlib import AsyncExitStack

from .._shim_async import sleep


class Env:
    def __init__(self) -> None:
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> "Env":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Release everything this client holds."""
        await self._stack.aclose()
        await sleep(0)
'''

TEST_SRC = f"""{MARKER}
from openenv.aio import Env


async def test_env() -> None:
    async with Env() as env:
        assert env is not None
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    _write(root / "src/openenv/_async/__init__.py", MARKER + "\n")
    _write(root / "src/openenv/_async/env.py", ENV_SRC)
    _write(root / "tests/_async/__init__.py", MARKER + "\n")
    _write(root / "tests/_async/test_env.py", TEST_SRC)
    return root


def run(root: Path, *, check: bool, tokens: dict[str, str] | None = None) -> tuple[int, str]:
    lines: list[str] = []
    code = gen.run(root, check=check, tokens=TABLE if tokens is None else tokens, echo=lines.append)
    return code, "\n".join(lines)


def generated(root: Path) -> set[str]:
    return {
        p.relative_to(root).as_posix()
        for d in ("src/openenv/_sync", "tests/_sync")
        if (root / d).exists()
        for p in (root / d).rglob("*")
        if p.is_file()
    }


# --- the happy path -------------------------------------------------------------------------


def test_write_then_check_passes(tree: Path) -> None:
    code, out = run(tree, check=False)
    assert code == 0, out
    assert generated(tree) == {
        "src/openenv/_sync/__init__.py",
        "src/openenv/_sync/env.py",
        "tests/_sync/__init__.py",
        "tests/_sync/test_env.py",
    }
    code, out = run(tree, check=True)
    assert code == 0, out
    assert "up to date" in out


def test_header_and_line_count_preserved(tree: Path) -> None:
    assert run(tree, check=False)[0] == 0
    for src_rel, out_rel in [
        ("src/openenv/_async/env.py", "src/openenv/_sync/env.py"),
        ("src/openenv/_async/__init__.py", "src/openenv/_sync/__init__.py"),
        ("tests/_async/test_env.py", "tests/_sync/test_env.py"),
    ]:
        src = (tree / src_rel).read_text().splitlines()
        out = (tree / out_rel).read_text().splitlines()
        assert out[0] == f"# GENERATED from {src_rel} by scripts/run_unasync.py -- DO NOT EDIT."
        assert len(out) == len(src)
    env = (tree / "src/openenv/_sync/env.py").read_text().splitlines()
    src = (tree / "src/openenv/_async/env.py").read_text().splitlines()
    # line N of the twin is line N of the source
    assert env[src.index("from .._shim_async import sleep")] == "from .._shim_sync import sleep"
    assert "        self._stack = ExitStack()" in env
    assert '    def __enter__(self) -> "Env":' in env
    assert "        self._stack.close()" in env
    test = (tree / "tests/_sync/test_env.py").read_text()
    assert "from openenv.sync import Env" in test
    assert "def test_env() -> None:\n    with Env() as env:" in test


def test_write_mode_is_idempotent(tree: Path) -> None:
    assert run(tree, check=False)[0] == 0
    code, out = run(tree, check=False)
    assert code == 0
    assert "0 written, 0 deleted, 4 unchanged" in out


# --- staleness ------------------------------------------------------------------------------


def test_stale_source_detected(tree: Path) -> None:
    assert run(tree, check=False)[0] == 0
    src = tree / "src/openenv/_async/env.py"
    src.write_text(src.read_text().replace("Release everything", "Free everything"))
    code, out = run(tree, check=True)
    assert code == 1
    assert "stale: src/openenv/_sync/env.py" in out
    assert '+        """Free everything' in out  # a unified diff is printed
    assert "run `nox -s unasync` and commit the result" in out
    # write mode repairs it
    assert run(tree, check=False)[0] == 0
    assert run(tree, check=True)[0] == 0


def test_edited_generated_file_detected(tree: Path) -> None:
    assert run(tree, check=False)[0] == 0
    out_file = tree / "src/openenv/_sync/env.py"
    before = out_file.read_text()
    # appended at the end: a line-by-line zip of source and output would miss this
    out_file.write_text(before + "\n\ndef extra() -> None:\n    pass\n")
    code, out = run(tree, check=True)
    assert code == 1
    assert "stale: src/openenv/_sync/env.py" in out
    assert "+def extra" not in out and "-def extra() -> None:" in out
    assert run(tree, check=False)[0] == 0
    assert out_file.read_text() == before


def test_missing_file_detected(tree: Path) -> None:
    assert run(tree, check=False)[0] == 0
    (tree / "tests/_sync/test_env.py").unlink()
    code, out = run(tree, check=True)
    assert code == 1
    assert "missing: tests/_sync/test_env.py" in out


def test_orphan_detected_and_deleted(tree: Path) -> None:
    assert run(tree, check=False)[0] == 0
    _write(tree / "tests/_sync/sub/test_gone.py", "# GENERATED from nothing\n")
    _write(tree / "src/openenv/_sync/__pycache__/env.cpython-311.pyc", "")  # ignored
    code, out = run(tree, check=True)
    assert code == 1
    assert "orphan: tests/_sync/sub/test_gone.py" in out
    assert "__pycache__" not in out
    code, out = run(tree, check=False)
    assert code == 0
    assert "deleted orphan tests/_sync/sub/test_gone.py" in out
    assert not (tree / "tests/_sync/sub").exists()
    assert run(tree, check=True)[0] == 0


def test_orphan_of_deleted_source(tree: Path) -> None:
    assert run(tree, check=False)[0] == 0
    (tree / "src/openenv/_async/env.py").unlink()
    code, out = run(tree, check=True, tokens={"aio": "sync"})  # the rest was used by env.py
    assert code == 1
    assert "orphan: src/openenv/_sync/env.py" in out


# --- rules on the sources and the output ----------------------------------------------------


def _fails_without_writing(root: Path, tokens: dict[str, str] | None = None) -> str:
    code, out = run(root, check=False, tokens=tokens)
    assert code == 1, out
    assert "nothing was written" in out
    assert generated(root) == set()
    return out


def test_residue_in_docstring_detected(tree: Path) -> None:
    src = tree / "src/openenv/_async/env.py"
    src.write_text(src.read_text().replace("Release everything", "Cancel the asyncio tasks"))
    out = _fails_without_writing(tree)
    assert "src/openenv/_sync/env.py:20: async residue 'asyncio'" in out


def test_residue_await_in_comment_detected(tree: Path) -> None:
    _write(tree / "tests/_async/test_more.py", f"{MARKER}\nX = 1  # you must await it\n")
    out = _fails_without_writing(tree)
    assert "tests/_sync/test_more.py:2: async residue 'await'" in out


def test_unmapped_async_name_detected(tree: Path) -> None:
    _write(
        tree / "src/openenv/_async/foo.py",
        f"{MARKER}\nclass AsyncFoo:\n    pass\n",
    )
    out = _fails_without_writing(tree)
    assert "src/openenv/_async/foo.py:2: 'AsyncFoo' is not in the token table" in out


def test_builtin_async_names_need_no_row(tree: Path) -> None:
    _write(
        tree / "src/openenv/_async/it.py",
        f"{MARKER}\nfrom collections.abc import AsyncIterator\n\nX: AsyncIterator[int] | None\n",
    )
    assert run(tree, check=False)[0] == 0
    assert "from collections.abc import Iterator" in (tree / "src/openenv/_sync/it.py").read_text()


def test_unused_table_key_detected(tree: Path) -> None:
    out = _fails_without_writing(tree, tokens={**TABLE, "helpers_async": "helpers_sync"})
    assert "token table keys never used" in out
    assert "helpers_async" in out
    assert "AsyncExitStack" not in out.split("never used", 1)[1]


def test_dotted_table_key_rejected(tree: Path) -> None:
    out = _fails_without_writing(tree, tokens={**TABLE, "websockets.asyncio": "websockets.sync"})
    assert "single identifiers only" in out


def test_marker_required(tree: Path) -> None:
    (tree / "tests/_async/__init__.py").write_text("")
    out = _fails_without_writing(tree)
    assert "tests/_async/__init__.py:1: line 1 must be the marker comment" in out


@pytest.mark.parametrize(
    "line",
    [
        "import asyncio",
        "import anyio.to_thread",
        "from trio import sleep",
        "import sniffio",
        "from websockets.asyncio.client import connect",
        "from websockets import asyncio",
    ],
)
def test_banned_imports(tree: Path, line: str) -> None:
    _write(tree / "src/openenv/_async/bad.py", f"{MARKER}\n{line}\n")
    out = _fails_without_writing(tree)
    assert "src/openenv/_async/bad.py:2: imports" in out


def test_await_paren_detected(tree: Path) -> None:
    _write(
        tree / "src/openenv/_async/bad.py",
        f"{MARKER}\nasync def f(x: object) -> None:\n    print(await(x))\n",
    )
    out = _fails_without_writing(tree)
    assert "src/openenv/_async/bad.py:3: `await` must be followed by a space" in out


def test_non_python_file_rejected(tree: Path) -> None:
    _write(tree / "tests/_async/data.json", "{}")
    out = _fails_without_writing(tree)
    assert "tests/_async/data.json: only .py files" in out


def test_py_typed_copied_to_the_twin(tree: Path) -> None:
    """PEP 561 markers are the one non-Python file the async trees may hold; the twin gets a copy."""
    _write(tree / "src/openenv/_async/py.typed", "")
    code, out = run(tree, check=False)
    assert code == 0, out
    assert (tree / "src/openenv/_sync/py.typed").read_bytes() == b""
    assert run(tree, check=True)[0] == 0
    (tree / "src/openenv/_async/py.typed").unlink()
    code, out = run(tree, check=True)
    assert code == 1 and "orphan: src/openenv/_sync/py.typed" in out


def test_other_unasync_version_refused(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unasync, "__version__", "0.5.0")
    out = _fails_without_writing(tree)
    assert "refusing to run with unasync 0.5.0" in out


# --- the command line with the real token table ---------------------------------------------


def test_cli_with_real_table(tree: Path) -> None:
    """The real TOKENS, used by a sample that names every key, through the CLI."""
    names = ", ".join(sorted(gen.TOKENS))
    _write(
        tree / "src/openenv/_async/uses_table.py",
        f"{MARKER}\n\n\ndef _every_key() -> object:\n    return ({names},)\n",
    )

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(SCRIPT), "--root", str(tree), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    result = cli("--check")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "missing: src/openenv/_sync/uses_table.py" in result.stdout
    assert "run `nox -s unasync` and commit the result" in result.stdout
    result = cli()
    assert result.returncode == 0, result.stdout + result.stderr
    twin = (tree / "src/openenv/_sync/uses_table.py").read_text()
    for key, value in gen.TOKENS.items():
        assert value in twin, key
    result = cli("--check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (REPO / "src/openenv/_sync/uses_table.py").exists()


# --- the facades: generated from the two lists of public names ---------------------------------

SHARED_SRC = '''"""Shared."""

from typing import TYPE_CHECKING

from ._core.errors import BoomError

if TYPE_CHECKING:
    from ._core.models import Action

__all__ = ["BoomError", "Action"]
'''

FACADE_SRC = f'''"""The facade."""

{gen.FACADE_BEGIN}
{gen.FACADE_END}

if not TYPE_CHECKING:
    pass
'''


@pytest.mark.parametrize("layout", ["module", "package"])
def test_facades_are_generated_from_the_two_lists(tree: Path, layout: str) -> None:
    _write(tree / "src/openenv/_async/__init__.py", f'{MARKER}\nfrom .env import Env\n\n__all__ = ["Env"]\n')
    _write(tree / "src/openenv/_shared.py", SHARED_SRC)
    facade = tree / ("src/openenv/sync.py" if layout == "module" else "src/openenv/sync/__init__.py")
    _write(facade, FACADE_SRC)
    code, out = run(tree, check=True)
    assert code == 1 and "stale: " in out  # the empty block is out of date
    assert run(tree, check=False)[0] == 0
    text = facade.read_text(encoding="utf-8")
    up = "." if layout == "module" else ".."
    # shared names come from where _shared.py imports them: openenv/_shared.py has no py.typed (the namespace
    # root may not), so a type checker would read what it re-exports as Any
    assert (
        f"from {up}_sync import Env as Env\n" in text
        and f"from {up}_core.errors import BoomError as BoomError\n" in text
    )
    assert f"if TYPE_CHECKING:\n    from {up}_core.models import Action as Action\n" in text  # lazy: type checkers only
    assert '__all__ = [\n    "Env",\n    "BoomError",\n    "Action",\n]\n' in text
    assert text.startswith('"""The facade."""\n') and text.endswith("if not TYPE_CHECKING:\n    pass\n")
    assert run(tree, check=True)[0] == 0
    # a listed name that is never imported: refused, nothing written
    _write(tree / "src/openenv/_shared.py", SHARED_SRC.replace('"Action"]', '"Action", "Missing"]'))
    code, out = run(tree, check=True)
    assert code == 1 and "'Missing' is in __all__ but never imported" in out

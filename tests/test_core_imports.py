"""``openenv._core`` is sans-IO: importing it pulls in no IO library, and the sync facade no httpx."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import openenv._core

CORE_MODULES = sorted(f"openenv._core.{m.name}" for m in pkgutil.iter_modules(openenv._core.__path__))


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_every_core_module_imports_no_io_library() -> None:
    assert "openenv._core.session" in CORE_MODULES and "openenv._core.options" in CORE_MODULES
    code = (
        "import importlib, logging, sys\n"
        f"for name in {CORE_MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('websockets', 'httpx', 'docker', 'asyncio'))\n"
        "filters = logging.getLogger('openenv.websockets').filters\n"
        "print(bad, len(filters))\n"
    )
    assert _run(code) == "[] 0"  # no IO library, and no log filter installed at import


def test_import_openenv_sync_does_not_import_httpx() -> None:
    assert _run("import sys, openenv.sync; print('httpx' in sys.modules)") == "False"

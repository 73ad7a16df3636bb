"""hatchling build hook: refuse to build an sdist or wheel whose sync twin is stale.

Runs ``scripts/run_unasync.py --check`` (which compares the committed
``src/openenv/_sync`` and ``tests/_sync`` with a fresh generation). Editable
installs are skipped so ``pip install -e .`` never blocks the
edit -> regenerate -> test loop, and so is a tree without the generator script
(for example a wheel built from an sdist that left ``scripts/`` out).

An editable install gets a small import hook instead (``_openenv_twin_editable_finder``,
loaded by a ``.pth`` file): beside ``openenv-core`` or ``openenv``, whose
``openenv/__init__.py`` makes ``openenv`` a regular package that hides the
checkout's ``src/``, it finds ``openenv.sync``, ``openenv.aio``, ... in the
checkout. It is consulted last, so every name the released packages own
(``openenv.core``, ``openenv.cli``, ...) stays theirs. Hatch's own exact
mode (``dev-mode-exact``) cannot do this: it maps only top-level packages
with an ``__init__.py``, and ``openenv`` is a namespace package here.

Configured in pyproject.toml under ``[tool.hatch.build.hooks.custom]``, whose
``dependencies`` put the pinned unasync into the isolated build environment.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CheckSyncTwin(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        script = Path(self.root, "scripts", "run_unasync.py")
        if version == "editable":
            self._editable_finder(build_data)
            return
        if not script.exists():
            return
        result = subprocess.run(
            [sys.executable, str(script), "--check", "--root", str(self.root)],
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                "the generated sync twin is stale or invalid (see the output above); "
                "run `nox -s unasync` and commit the result before building"
            )

    def _editable_finder(self, build_data: dict[str, Any]) -> None:
        self._tmp = tempfile.mkdtemp(prefix="openenv-twin-editable-")
        module = Path(self._tmp, f"{EDITABLE_MODULE}.py")
        module.write_text(EDITABLE_FINDER.format(src=str(Path(self.root, "src", "openenv").resolve())))
        pth = Path(self._tmp, f"{EDITABLE_MODULE}.pth")
        pth.write_text(f"import {EDITABLE_MODULE}\n")
        build_data["force_include_editable"][str(module)] = module.name
        build_data["force_include_editable"][str(pth)] = pth.name

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


#: Not ``_*_editable``: griffe (the API docs' loader) reads a module of that name as
#: scikit-build-core's editable loader, parses its last line for a path and fails
#: (``IndexError``), which breaks ``mkdocs build`` in an editable install.
EDITABLE_MODULE = "_openenv_twin_editable_finder"
EDITABLE_FINDER = '''"""openenv-twin, installed editable: find its ``openenv.*`` modules in the checkout.

Written by scripts/hatch_build.py. Beside openenv-core or openenv, ``openenv`` is
their regular package and Python never looks in the checkout; this finder, last
on ``sys.meta_path``, answers only for direct children of ``openenv`` that
nothing before it found (so the released packages keep every name they own).
"""

import importlib.machinery
import sys

SRC = {src!r}


class OpenEnvTwinEditableFinder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if not name.startswith("openenv.") or name.count(".") != 1:
            return None
        return importlib.machinery.PathFinder.find_spec(name, [SRC])


if not any(getattr(f, "__name__", "") == "OpenEnvTwinEditableFinder" for f in sys.meta_path):
    sys.meta_path.append(OpenEnvTwinEditableFinder)
'''

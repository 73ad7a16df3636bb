"""hatchling build hook: refuse to build an sdist or wheel whose sync twin is stale.

Runs ``scripts/run_unasync.py --check`` (which compares the committed
``src/openenv/_sync`` and ``tests/_sync`` with a fresh generation). Editable
installs are skipped so ``pip install -e .`` never blocks the
edit -> regenerate -> test loop, and so is a tree without the generator script
(for example a wheel built from an sdist that left ``scripts/`` out).

Configured in pyproject.toml under ``[tool.hatch.build.hooks.custom]``, whose
``dependencies`` put the pinned unasync into the isolated build environment.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CheckSyncTwin(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        script = Path(self.root, "scripts", "run_unasync.py")
        if version == "editable" or not script.exists():
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

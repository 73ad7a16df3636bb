"""Sans-IO rules of which app a checkout serves: its package (pyproject.toml) and its app module's imports.

The pyproject texts and imports are those of OpenEnv's own environments (chess_env, grid_world_env,
wildfire_env, coding_env, echo_env) as their repository has them.
"""

from __future__ import annotations

from typing import Any

import pytest

from openenv._core.checkout import (
    BEYOND_TOP_LEVEL,
    AppChoice,
    choose_app,
    imported_siblings,
    needs_package_app,
    package_name,
    scan_app_source,
)

CHESS_PYPROJECT = """
[project]
name = "openenv-chess-env"

[project.scripts]
server = "chess_env.server.app:main"

[tool.setuptools]
packages = ["chess_env", "chess_env.server"]
package-dir = { "chess_env" = ".", "chess_env.server" = "server" }
"""

WILDFIRE_PYPROJECT = """
[tool.setuptools]
packages = ["wildfire_env", "wildfire_env.server"]
package-dir = {"wildfire_env" = ".", "wildfire_env.server" = "server"}
"""

GRID_PYPROJECT = """
# CRITICAL: This mapping tells Python that "grid_world_env" lives in the current folder "."
[tool.setuptools]
include-package-data = true
packages = ["grid_world_env", "grid_world_env.server"]
package-dir = { "grid_world_env" = ".", "grid_world_env.server" = "server" }

[tool.uv.sources]
openenv = { path = "../../", editable = true }
"""

CHESS_APP = """
from openenv.core.env_server import create_app

from ..models import ChessAction, ChessObservation
from .chess_environment import ChessEnvironment

app = create_app(ChessEnvironment, ChessAction, ChessObservation, env_name="chess_env")
"""

CODING_APP = """
from coding_env.models import CodeAction, CodeObservation
from coding_env.server.python_codeact_env import PythonCodeActEnv
from openenv.core.env_server import create_app

app = create_app(PythonCodeActEnv, CodeAction, CodeObservation, env_name="coding_env")
"""

GUARDED_APP = """
try:
    from ..models import GridWorldAction, GridWorldObservation
except ImportError as e:
    from models import GridWorldAction, GridWorldObservation
"""


@pytest.mark.parametrize(
    ("text", "directory", "expected"),
    [
        (CHESS_PYPROJECT, "chess", "chess_env"),  # package-dir maps the package to "."
        (WILDFIRE_PYPROJECT, "wildfire_env", "wildfire_env"),
        (GRID_PYPROJECT, "grid", "grid_world_env"),
        ('[tool.setuptools.package-dir]\n"my_env" = "."\n', "x", "my_env"),  # the table form
        ('[tool.setuptools]\npackages = [\n  "a_env",\n  "a_env.server",\n]\n', "x", "a_env"),  # packages only
        ('[tool.setuptools]\npy-modules = ["models"]\npackages = ["server"]\n', "checkout_echo", "checkout_echo"),
        (None, "echo_env", "echo_env"),  # no pyproject: the directory's name
        (None, "my-env", None),  # not an identifier: no package
        ('[tool.setuptools]\npackage-dir = { "" = "src" }  # a src layout\n', "co", "co"),
    ],
)
def test_the_package_comes_from_pyproject_then_the_directory(text: str | None, directory: str, expected: str) -> None:
    assert package_name(text, directory) == expected


def test_a_relative_import_beyond_the_top_level_needs_the_package() -> None:
    reason = scan_app_source(CHESS_APP, "server.app", "chess_env")
    assert BEYOND_TOP_LEVEL in reason and "from ..models" in reason
    choice = choose_app("server.app:app", "chess_env", reason)
    assert choice == AppChoice("chess_env.server.app:app", "chess_env", reason) and choice.qualified
    # imported as a package module, the same source is fine
    assert scan_app_source(CHESS_APP, "chess_env.server.app", "chess_env") == ""


def test_the_siblings_an_app_imports_relatively_are_listed_for_the_scan() -> None:
    # wildfire_env's server/app.py: `from .wildfire_environment import WildfireEnvironment`; the import that
    # needs the package (`from ..models import ...`) is in that module
    source = (
        "import os\nfrom .wildfire_environment import WildfireEnvironment\nfrom . import rules, helpers as h\n"
        "from .sub.deep import x\nfrom ..models import Action\nfrom .wildfire_environment import Other\n"
        "def later():\n    from .lazy import y\n"
    )
    assert imported_siblings(source, "server.app") == [
        "server.wildfire_environment",
        "server.rules",
        "server.helpers",
        "server.sub.deep",
    ]
    assert imported_siblings(source, "app") == []  # a top-level module has no package to be relative to
    assert imported_siblings("from .. import models\n", "pkg.server.app") == ["pkg.models"]
    assert imported_siblings("def f(:\n", "server.app") == []
    assert scan_app_source("from ..models import Action\n", "server.wildfire_environment", "wildfire_env")


def test_importing_its_own_package_by_name_needs_the_package() -> None:
    reason = scan_app_source(CODING_APP, "server.app", "coding_env")
    assert reason == "server.app imports its own package 'coding_env' by name"
    assert choose_app("server.app:app", "coding_env", reason).app == "coding_env.server.app:app"


def test_a_guarded_or_harmless_app_keeps_the_declared_name() -> None:
    assert scan_app_source(GUARDED_APP, "server.app", "grid_world_env") == ""
    assert scan_app_source("from .env import E\nimport os\n", "server.app", "echo_env") == ""
    assert scan_app_source("def f(:\n", "server.app", "x") == ""  # broken source: the server says why
    # an import inside a function does not run at import time
    assert scan_app_source("def main():\n    from ..models import X\n", "server.app", "x") == ""
    # a guard that does not catch ImportError does not protect
    unguarded = "try:\n    from ..models import X\nexcept KeyError:\n    pass\n"
    assert BEYOND_TOP_LEVEL in scan_app_source(unguarded, "server.app", "x")


def test_the_declared_app_stays_without_a_reason_or_a_package() -> None:
    assert choose_app("server.app:app", "chess_env", "") == AppChoice("server.app:app")
    assert choose_app("server.app:app", None, "beyond") == AppChoice("server.app:app")
    assert choose_app("chess_env.server.app:app", "chess_env", "x") == AppChoice("chess_env.server.app:app")


def test_which_import_errors_mean_run_it_as_a_package() -> None:
    assert needs_package_app(f"ImportError: {BEYOND_TOP_LEVEL}", None)
    assert needs_package_app("ModuleNotFoundError: No module named 'coding_env'", "coding_env")
    assert not needs_package_app("ModuleNotFoundError: No module named 'openenv.core'", "coding_env")
    assert not needs_package_app("RuntimeError: set TOKEN", "coding_env")


def test_app_sources_are_parsed_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkout servers start in parallel threads; CPython 3.11's ``ast.parse`` is not safe in two at once.

    Stop 34's CI: a pool of three checkout servers failed with "SystemError: AST constructor recursion
    depth mismatch" (python/cpython#106905). Two scans here: the second parse waits for the first.
    """
    import ast
    import threading

    from openenv._core import checkout

    inside = threading.Event()
    release = threading.Event()
    overlapped: list[bool] = []
    real_parse = ast.parse
    active = [0]

    def parse(source: str, *args: Any, **kwargs: Any) -> Any:
        active[0] += 1
        overlapped.append(active[0] > 1)
        inside.set()
        release.wait(5)
        try:
            return real_parse(source, *args, **kwargs)
        finally:
            active[0] -= 1

    monkeypatch.setattr(ast, "parse", parse)  # the module checkout parses with
    scans = [threading.Thread(target=checkout.scan_app_source, args=("import os\n", "server.app", None))]
    scans.append(threading.Thread(target=checkout.scan_app_source, args=("import sys\n", "server.app", None)))
    scans[0].start()
    assert inside.wait(5)
    scans[1].start()
    scans[1].join(0.5)  # time for the second scan to reach the parse, were it not held back
    release.set()
    for scan in scans:
        scan.join(5)
    assert overlapped == [False, False]

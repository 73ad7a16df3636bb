"""The checkout probe's memo (``openenv._blocking.checkout.probe_current``).

A pool or ``environment_factory`` starts one server per session of a one-session
checkout, each from a new provider; one probe (a fresh interpreter importing the
app) answers for them all.  These run the real probe on a checkout whose app
records each import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from openenv._blocking import checkout

_RECORD = "import os\nwith open(os.environ['PROBES'], 'a') as out:\n    out.write('probe\\n')\n"


def _checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str = "") -> Path:
    monkeypatch.setenv("PROBES", str(tmp_path / "probes"))
    root = tmp_path / "probe_env"
    (root / "server").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "server" / "__init__.py").write_text("")
    (root / "server" / "app.py").write_text(_RECORD + extra)
    return root


def _probes(tmp_path: Path) -> int:
    probes = tmp_path / "probes"
    return probes.read_text().count("probe") if probes.exists() else 0


def _edit(root: Path) -> None:
    app = root / "server" / "app.py"
    app.write_text(app.read_text() + "# edited\n")  # another size: a new stamp whatever the clock's resolution


def test_a_success_answers_until_the_app_changes_or_it_expires(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _checkout(tmp_path, monkeypatch)
    assert checkout.probe_current(str(root), "server.app:app") == ""
    assert checkout.probe_current(str(root), "server.app:app") == ""
    assert _probes(tmp_path) == 1  # the second start of the checkout reused the first probe
    _edit(root)
    assert checkout.probe_current(str(root), "server.app:app") == ""
    assert _probes(tmp_path) == 2  # an edited app is probed again
    monkeypatch.setattr(checkout, "PROBE_MEMO_SECONDS", 0.0)
    assert checkout.probe_current(str(root), "server.app:app") == ""
    assert _probes(tmp_path) == 3  # and one that answered long enough ago


def test_an_app_named_through_the_checkouts_package_is_stamped_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # OpenEnv's layout: the checkout is the package (probe_env.server.app), found through its parent
    root = _checkout(tmp_path, monkeypatch)
    env = {"PYTHONPATH": str(tmp_path)}
    assert checkout.probe_current(str(root), "probe_env.server.app:app", env=env) == ""
    assert checkout.probe_current(str(root), "probe_env.server.app:app", env=env) == ""
    assert _probes(tmp_path) == 1
    _edit(root)
    assert checkout.probe_current(str(root), "probe_env.server.app:app", env=env) == ""
    assert _probes(tmp_path) == 2


def test_a_failure_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _checkout(tmp_path, monkeypatch, "raise RuntimeError('the app is broken')\n")
    assert "the app is broken" in checkout.probe_current(str(root), "server.app:app")
    assert "the app is broken" in checkout.probe_current(str(root), "server.app:app")
    assert _probes(tmp_path) == 2  # a checkout fixed meanwhile would have been found fixed


def test_another_environment_is_probed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _checkout(tmp_path, monkeypatch, "import os\nassert os.environ.get('MODE') != 'broken', 'MODE'\n")
    assert checkout.probe_current(str(root), "server.app:app", env={"MODE": "ok"}) == ""
    assert "MODE" in checkout.probe_current(str(root), "server.app:app", env={"MODE": "broken"})
    assert _probes(tmp_path) == 2


def test_a_declared_app_that_needs_its_package_is_not_probed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # server/app.py imports a sibling that imports beyond the top level in a way no scan of the source sees
    # (importlib): only the probe finds it; the app runs as probe_env.server.app, as OpenEnv's Dockerfiles run it
    root = _package_checkout(
        tmp_path, monkeypatch, "import importlib\nWorld = importlib.import_module('..models', __package__).WORLD\n"
    )
    first = checkout.prepare(str(root), "server.app:app")
    assert first.choice.app == "probe_env.server.app:app" and _probes(tmp_path) == 2  # declared failed, qualified ran
    # the next server of the checkout (one per session of a one-session checkout) goes there at once
    second = checkout.prepare(str(root), "server.app:app")
    assert second.choice == first.choice and second.pythonpath == first.pythonpath
    assert _probes(tmp_path) == 2
    # once the qualified app's own success has expired, that app is probed (once), not the declared one first
    monkeypatch.setattr(checkout, "_PROBED_OK", {})
    assert checkout.prepare(str(root), "server.app:app").choice == first.choice
    assert _probes(tmp_path) == 3
    # and once the memo has expired, the declared app is tried first again
    monkeypatch.setattr(checkout, "PROBE_MEMO_SECONDS", 0.0)
    assert checkout.prepare(str(root), "server.app:app").choice == first.choice
    assert _probes(tmp_path) == 5


def test_a_sibling_that_imports_beyond_the_top_level_is_found_without_a_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # OpenEnv's layout: server/app.py imports server/<name>_environment.py, which does `from ..models import`
    root = _package_checkout(tmp_path, monkeypatch, "from ..models import WORLD as World\n")
    launch = checkout.prepare(str(root), "server.app:app")
    assert launch.choice.app == "probe_env.server.app:app"
    assert "server.world does `from ..models import ...`" in launch.choice.reason
    assert _probes(tmp_path) == 1  # only the app that runs was probed


def test_a_subpackage_imports_relative_to_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # server/app.py -> server/rules/__init__.py, whose `from ..models import` is server.models: inside the package
    root = _checkout(tmp_path, monkeypatch, "from .rules import RULES\n")
    (root / "server" / "models.py").write_text("RULES = 'rules'\n")
    (root / "server" / "rules").mkdir()
    (root / "server" / "rules" / "__init__.py").write_text("from ..models import RULES\n")
    monkeypatch.setattr(checkout, "gather_facts", _facts_without_venv_or_uv)
    launch = checkout.prepare(str(root), "server.app:app")
    assert launch.choice.app == "server.app:app" and not launch.choice.qualified
    assert launch.plan.kind == "current" and _probes(tmp_path) == 1


def _package_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, world: str) -> Path:
    """A checkout whose server/app.py imports server/world.py (``world``, its source), run by this interpreter."""
    root = _checkout(tmp_path, monkeypatch, "from .world import World\n")
    (root / "models.py").write_text("WORLD = 'world'\n")
    (root / "server" / "world.py").write_text(world)
    monkeypatch.setattr(checkout, "gather_facts", _facts_without_venv_or_uv)
    return root


def _facts_without_venv_or_uv(directory: str, app: str, *, install: bool = False) -> Any:
    from dataclasses import replace

    return replace(_GATHER(directory, app, install=install), venv_python=None, uv=None)


_GATHER = checkout.gather_facts

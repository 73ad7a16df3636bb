"""The two facades and the two shims expose the same API."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

import openenv.aio as aio
import openenv.sync as sync
from openenv import _shared, _shim_async, _shim_sync

FLAVOURED = {
    "Env",
    "EnvPool",
    "Provider",
    "ServerProvider",
    "DockerProvider",
    "ProcessProvider",
    "RayProvider",
    "environment_factory",
}


def test_facades_export_the_same_names() -> None:
    assert sorted(aio.__all__) == sorted(sync.__all__)
    assert FLAVOURED <= set(aio.__all__)
    for name in aio.__all__:
        assert hasattr(aio, name) and hasattr(sync, name), name
        if name in FLAVOURED:
            assert getattr(aio, name) is not getattr(sync, name), name
        else:
            assert getattr(aio, name) is getattr(sync, name) is getattr(_shared, name)


def _public_methods(cls: type) -> dict[str, object]:
    return {
        name: member
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") or name in ("__init__", "_step_payload", "_parse_result", "_parse_state")
    }


@pytest.mark.parametrize("name", sorted(FLAVOURED))
def test_flavoured_twins_have_the_same_api(name: str) -> None:
    a_cls, s_cls = getattr(aio, name), getattr(sync, name)
    a, s = _public_methods(a_cls), _public_methods(s_cls)
    assert sorted(a) == sorted(s)
    for name, member in a.items():
        other = s[name]
        if isinstance(member, property):
            assert isinstance(other, property), name
            assert member.__doc__ == other.__doc__, name
            continue
        if not callable(member):
            assert member == other, name
            continue
        assert str(inspect.signature(member)) == str(inspect.signature(other)), name  # type: ignore[arg-type]
        assert inspect.getdoc(member) == inspect.getdoc(other), name
        assert inspect.iscoroutinefunction(other) is False, name
    assert inspect.getdoc(a_cls) == inspect.getdoc(s_cls)
    if name == "Env":
        for method in ("connect", "disconnect", "close", "reset", "step", "state", "new_session"):
            assert inspect.iscoroutinefunction(getattr(aio.Env, method)), method


def test_shims_match() -> None:
    assert sorted(_shim_async.__all__) == sorted(_shim_sync.__all__)
    for name in _shim_async.__all__:
        a, s = getattr(_shim_async, name), getattr(_shim_sync, name)
        if inspect.isfunction(a):
            assert inspect.signature(a).parameters.keys() == inspect.signature(s).parameters.keys(), name
            assert not inspect.iscoroutinefunction(s), name


def test_openenv_is_a_namespace_package() -> None:
    """No ``openenv/__init__.py`` of ours: the released packages own that file (we install beside them)."""
    import openenv

    assert getattr(openenv, "__file__", None) is None or "openenv_core" in str(openenv.__file__)
    assert not any(Path(p, "__init__.py").exists() for p in openenv.__path__ if Path(p, "sync.py").exists())


def test_version_comes_from_the_installed_metadata() -> None:
    from importlib.metadata import version

    assert aio.__version__ == sync.__version__ == version("openenv-twin")


def _modules_after(statement: str) -> list[str]:
    """Every module in ``sys.modules`` of a fresh interpreter after ``statement``."""
    code = f"{statement}; import json, sys; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return list(json.loads(out))


def _within(modules: list[str], package: str) -> list[str]:
    return [m for m in modules if m == package or m.startswith(package + ".")]


def test_importing_openenv_loads_no_flavour() -> None:
    loaded = _modules_after("import openenv._shared")
    assert "openenv._shared" in loaded
    for package in ("openenv._async", "openenv._sync", "docker"):
        assert _within(loaded, package) == [], package
    # the probe does see a flavour (and docker-py) once they are imported
    flavoured = _modules_after("import openenv.aio, openenv.sync, docker")
    assert all(_within(flavoured, p) for p in ("openenv._async", "openenv._sync", "docker"))


def test_sync_facade_never_imports_asyncio() -> None:
    code = "import openenv.sync, sys; print(*(m in sys.modules for m in ('asyncio', 'docker', 'pydantic', 'ray')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # asyncio: never on the sync side; docker-py: only when Docker is used; pydantic: only for typed use;
    # ray: only when a RayProvider starts
    assert out.split() == ["False", "False", "False", "False"]


@pytest.mark.parametrize("flavour", ["openenv.sync", "openenv.aio"])
def test_models_load_on_first_use(flavour: str) -> None:
    code = (
        f"import sys, {flavour} as f; before = 'pydantic' in sys.modules; "
        "print(before, f.Action.__name__, f.Tool.__name__, 'pydantic' in sys.modules, f.State is f.State)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "Action", "Tool", "True", "True"]

"""The two facades and the two shims expose the same API."""

from __future__ import annotations

import inspect
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
    assert not any(Path(p, "__init__.py").exists() for p in openenv.__path__ if Path(p, "sync").is_dir())


def test_py_typed_in_our_subpackages_only() -> None:
    """PEP 561 for a namespace package: a ``py.typed`` in each of our subpackages, none at the root.

    A root ``openenv/py.typed`` would mark openenv-core's modules (installed in the
    same directory) as typed too; and the public modules must be inside a marked
    subpackage (``openenv/sync/__init__.py``, not ``openenv/sync.py``) for a type
    checker to read them from an installed wheel.
    """
    import openenv

    (root,) = [Path(p) for p in openenv.__path__ if Path(p, "sync").is_dir()]
    assert not (root / "py.typed").exists()
    ours = sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert {"sync", "aio", "server", "_core", "_async", "_sync", "_blocking", "_cli"} <= set(ours)
    assert [name for name in ours if not (root / name / "py.typed").is_file()] == []
    assert not (root / "sync.py").exists() and not (root / "aio.py").exists()


def test_version_comes_from_the_installed_metadata() -> None:
    from importlib.metadata import version

    assert aio.__version__ == sync.__version__ == version("openenv-twin")


def test_importing_openenv_loads_no_flavour() -> None:
    code = "import openenv._shared, sys; print(sorted(m for m in sys.modules if m.startswith('openenv.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "openenv._async" not in out and "openenv._sync" not in out and "docker" not in out


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


def test_editable_finder_module_is_not_taken_for_another_backends_loader() -> None:
    """The editable install's finder module must not be named like another build backend's loader.

    griffe (mkdocstrings' loader, so ``mkdocs build`` in an editable install) reads
    each ``.pth`` file's ``import X`` line and, when ``X.py`` is named like the
    loader of editables, setuptools, scikit-build-core or meson-python, parses that
    file for a path; ours has none, and ``_openenv_twin_editable`` (scikit-build-core's
    ``_*_editable.py``) made it fail with ``IndexError``. The patterns are griffe's
    (``griffe/_internal/finder.py``, 1.x).
    """
    import ast
    import re

    tree = ast.parse((Path(__file__).parents[1] / "scripts" / "hatch_build.py").read_text(encoding="utf-8"))
    (name,) = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "EDITABLE_MODULE" for t in node.targets)
    ]
    loaders = (
        r"^__editables_\w+\.py$",  # editables
        r"^_editable_impl_\w+\.py$",  # editables (hatchling)
        r"^__editable__\w+\.py$",  # setuptools
        r"^_\w+_editable.py$",  # scikit-build-core
        r"^_\w+_editable_loader.py$",  # meson-python
    )
    assert [pattern for pattern in loaders if re.match(pattern, f"{name}.py")] == []

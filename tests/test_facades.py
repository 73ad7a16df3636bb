"""The two facades and the two shims expose the same API; the public names are listed once."""

from __future__ import annotations

import inspect
import json
import pickle
import subprocess
import sys
import traceback
import typing
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import typing_extensions

import openenv._async as flavoured_async
import openenv._sync as flavoured_sync
import openenv.aio as aio
import openenv.sync as sync
from openenv import _shared, _shim_async, _shim_sync

# the one flavoured list (the shared one is ``_shared.__all__``)
FLAVOURED = flavoured_async.__all__
LAZY = ("Action", "Observation", "State", "Tool", "ToolResult")  # pydantic models, loaded on first use
FACADES = [(aio, flavoured_async), (sync, flavoured_sync)]


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def test_the_facades_are_built_from_the_two_lists() -> None:
    assert flavoured_sync.__all__ == FLAVOURED
    assert len(set(FLAVOURED)) == len(FLAVOURED) and len(set(_shared.__all__)) == len(_shared.__all__)
    assert not set(FLAVOURED) & set(_shared.__all__)
    for facade, _ in FACADES:
        assert sorted(facade.__all__) == sorted([*FLAVOURED, *_shared.__all__]), facade.__name__
        assert len(set(facade.__all__)) == len(facade.__all__), facade.__name__
    assert aio.__all__ == sync.__all__


@pytest.mark.parametrize(("facade", "flavour"), FACADES, ids=["aio", "sync"])
def test_every_name_comes_from_its_list(facade: ModuleType, flavour: ModuleType) -> None:
    for name in FLAVOURED:
        assert getattr(facade, name) is getattr(flavour, name), name
    for name in _shared.__all__:
        assert getattr(aio, name) is getattr(sync, name) is getattr(_shared, name), name
    assert all(getattr(aio, name) is not getattr(sync, name) for name in FLAVOURED)


@pytest.mark.parametrize("facade", [aio, sync], ids=["aio", "sync"])
def test_a_facade_shows_and_holds_nothing_private(facade: ModuleType) -> None:
    # what `dir()` and tab completion show: the public names (and the module dunders)
    assert {n for n in dir(facade) if not _dunder(n)} == set(facade.__all__)
    assert "__version__" in dir(facade)
    # what the module holds (`from ._core.errors import *` once leaked error_from_frame, ErrorCode, ...)
    assert {n for n in vars(facade) if not _dunder(n)} <= set(facade.__all__)
    for leaked in ("error_from_frame", "ErrorCode", "TYPE_CHECKING", "Any", "lazy_exports", "_finish"):
        assert not hasattr(facade, leaked), leaked
    with pytest.raises(AttributeError, match=f"module '{facade.__name__}' has no attribute 'NoSuchName'"):
        getattr(facade, "NoSuchName")  # noqa: B009


def test_static_types_are_the_real_ones() -> None:
    """mypy sees every name with its type, the lazy models too (each ignore below must be needed)."""
    wrong_env: int = sync.Env  # type: ignore[assignment]
    wrong_model: int = aio.Action  # type: ignore[assignment]
    wrong_error: int = aio.SessionLost  # type: ignore[assignment]
    wrong_version: int = sync.__version__  # type: ignore[assignment]
    seen: list[object] = [wrong_env, wrong_model, wrong_error, type(wrong_version)]
    assert seen == [sync.Env, aio.Action, aio.SessionLost, str]
    # mypy sees no module __getattr__: an unknown name is an error, not Any (else these ignores are unused)
    with pytest.raises(AttributeError):
        sync.NoSuchName  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(AttributeError):
        aio.NoSuchName  # type: ignore[attr-defined]  # noqa: B018


@pytest.mark.parametrize(("facade", "flavour"), FACADES, ids=["aio", "sync"])
def test_flavoured_names_report_their_facade(facade: ModuleType, flavour: ModuleType) -> None:
    for name in FLAVOURED:
        assert getattr(facade, name).__module__ == facade.__name__, name
    assert repr(facade.Env).startswith(f"<class '{facade.__name__}.Env'")


def _is_error(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, BaseException)


def _classes_in(hint: object) -> Iterator[type]:
    if isinstance(hint, type):
        yield hint
    for arg in typing.get_args(hint):
        yield from _classes_in(arg)
    origin = typing.get_origin(hint)
    if isinstance(origin, type):
        yield origin


@pytest.mark.parametrize("facade", [sync, aio], ids=["sync", "aio"])
def test_public_signatures_name_only_public_classes(facade: ModuleType) -> None:
    """What a flavoured class's public method takes or returns can be imported: no ``openenv._*`` module in it."""
    public = {"openenv.sync", "openenv.aio", "openenv.errors", "openenv._core.models", "openenv._core.tool_models"}
    seen = set()
    for name in FLAVOURED:
        value = getattr(facade, name)
        names = [m for m in dir(value) if not m.startswith("_")] if isinstance(value, type) else []
        members = [getattr(value, m) for m in names] if names else [value]
        for member in members:
            member = getattr(member, "fget", member)  # a property: its getter's return type
            if not inspect.isroutine(member):  # attributes, nested classes, TRLEnvironment's close object
                continue
            try:
                hints = typing.get_type_hints(member)
            except NameError:  # a name imported only for type checkers: mypy --strict checks those
                continue
            for hint in hints.values():
                for cls in _classes_in(hint):
                    # a TypedDict only types ``**kwargs`` (``Unpack[EnvOptions]``): its keys are the documented names
                    if cls.__module__.startswith("openenv.") and not typing_extensions.is_typeddict(cls):
                        seen.add(cls.__name__)
                        assert cls.__module__ in public, f"{name}.{getattr(member, '__name__', member)}: {cls!r}"
    assert {"ClientOptions", "PoolCheckout", "TRLEnvironment"} <= seen


def test_shared_names_report_their_public_home() -> None:
    """Errors: ``openenv.errors`` (neither flavour's name); the other shared classes: ``openenv.sync``."""
    import openenv.errors

    for name in _shared.__all__:
        value = getattr(_shared, name)
        expected = "openenv.errors" if _is_error(value) else "openenv.sync"
        if name in LAZY:
            expected = value.__module__
        assert value.__module__ == expected, name
        if _is_error(value):
            assert getattr(openenv.errors, name) is value is getattr(aio, name) is getattr(sync, name), name
    errors = sorted(n for n in _shared.__all__ if _is_error(getattr(_shared, n)))
    assert sorted(openenv.errors.__all__) == errors
    for name in LAZY:  # pydantic resolves a subclass's inherited annotations through the defining module
        assert getattr(_shared, name).__module__.startswith("openenv._core."), name
    line = traceback.format_exception_only(aio.ConnectError, aio.ConnectError("refused"))[-1]
    assert line == "openenv.errors.ConnectError: refused\n"  # in asyncio code too: no "sync" in its name


def test_shared_classes_pickle_by_their_public_name_and_keep_their_type_hints() -> None:
    for name in _shared.__all__:
        value = getattr(_shared, name)
        if isinstance(value, type):
            assert pickle.loads(pickle.dumps(value)) is value, name
            assert f"{value.__module__}\n{name}".encode() in pickle.dumps(value, protocol=2) or name in LAZY, name
            typing.get_type_hints(value)  # resolved in the defining module before the rename
    error = sync.PoolError("2 failed", {2: None, 0: None}, {2: sync.SessionLost("gone"), 0: sync.EnvClosed("x")})
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is sync.PoolError and str(again) == "2 failed"
    assert list(again.results) == [2, 0] and {i: type(e) for i, e in again.errors.items()} == {
        2: sync.SessionLost,
        0: sync.EnvClosed,
    }


def test_a_pickled_error_loads_in_a_process_without_asyncio() -> None:
    data = pickle.dumps(aio.ConnectError("refused"))
    code = (
        "import pickle, sys; e = pickle.loads(sys.stdin.buffer.read()); "
        "print(type(e).__module__, type(e).__name__, e, 'asyncio' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, check=True).stdout
    assert out.decode().split() == ["openenv.errors", "ConnectError", "refused", "False"]
    code = (
        "import sys, openenv.errors; print(sorted(m for m in ('asyncio', 'websockets', 'httpx') if m in sys.modules))"
    )
    light = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, text=True).stdout
    assert light.strip() == "[]"  # the errors' home imports only the errors


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
            if type(member).__module__.startswith("openenv._async."):  # a twin's own descriptor (TRLEnvironment.close)
                assert type(member).__qualname__ == type(other).__qualname__, name
            else:
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


def _modules_after(statement: str) -> list[str]:
    """Every module in ``sys.modules`` of a fresh interpreter after ``statement``."""
    code = f"{statement}; import json, sys; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return list(json.loads(out))


def _within(modules: list[str], package: str) -> list[str]:
    return [m for m in modules if m == package or m.startswith(package + ".")]


def test_importing_openenv_loads_no_flavour() -> None:
    loaded = _modules_after("import openenv._shared")
    assert "openenv._shared" in loaded and "openenv._core.errors" in loaded  # the probe sees the modules
    for package in ("openenv._async", "openenv._sync", "docker", "asyncio", "pydantic"):
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

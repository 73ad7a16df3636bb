"""The import picture: every room imports only rooms below it, and no import closes a circle.

Read from the source with ``ast`` (every ``import``, the lazy ones inside
functions included: the Ray actor, then in ``_blocking/ray.py``, once reached up into the CLI from a
method, which closed the only cycle), so no module is executed here.
"""

from __future__ import annotations

import ast
import collections
import pathlib

import openenv._core

SRC = pathlib.Path(openenv._core.__file__).resolve().parent.parent  # src/openenv

#: What each room may import (besides itself).  Anything not listed is refused.
ALLOWED: dict[str, set[str]] = {
    "_core": set(),
    "_adapters": {"_core"},
    "_blocking": {"_core"},
    "_ray_actor": {"_core", "_blocking", "server"},  # Ray's actor serves an EnvServer, on a node
    "_shim_async": {"_core", "_adapters", "_blocking"},
    "_shim_sync": {"_core", "_adapters", "_blocking"},
    "_async": {"_core", "_adapters", "_blocking", "_shim_async", "_ray_actor"},
    "_sync": {"_core", "_adapters", "_blocking", "_shim_sync", "_ray_actor"},
    "server": {"_core", "_facade"},
    "_reaper": {"_core", "_blocking"},
    "_facade": {"_shared"},
    "_shared": {"_core"},
    "errors": {"_core", "_shared"},  # the neutral public home of the shared errors
    "sync": {"_core", "_facade", "_shared", "_sync"},
    "aio": {"_core", "_facade", "_shared", "_async"},
    "_cli": {"_core", "_adapters", "_blocking", "server", "sync", "_sync"},
    "__main__": {"_cli"},
}


def _module_name(path: pathlib.Path) -> str:
    parts = ["openenv", *path.relative_to(SRC).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Module name -> the ``openenv.*`` names it imports (anywhere in its body)."""
    found: dict[str, set[str]] = collections.defaultdict(set)
    for path in SRC.rglob("*.py"):
        module = _module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            found[module].update(n for n in _imported(node, package) if n.startswith("openenv."))
    return found


def _imported(node: ast.AST, package: str) -> list[str]:
    """The dotted names an import statement in ``package`` names (``from .a import b``: ``pkg.a``, ``pkg.a.b``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    return [source] + [f"{source}.{alias.name}" for alias in node.names]


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _room_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = collections.defaultdict(set)
    for module, names in _imports().items():
        for name in names:
            if _room(name) != _room(module):
                graph[_room(module)].add(_room(name))
    return graph


def test_every_room_imports_only_what_it_may() -> None:
    graph = _room_graph()
    assert set(graph) - set(ALLOWED) <= {"openenv"}, f"rooms without a rule: {set(graph) - set(ALLOWED)}"
    upward = {room: sorted(targets - ALLOWED[room]) for room, targets in graph.items() if targets - ALLOWED[room]}
    assert upward == {}, f"imports against the layering: {upward}"


def test_core_and_blocking_never_reach_up() -> None:
    bad = {
        module: sorted(
            n for n in names if _room(n) in {"_async", "_sync", "_blocking", "_cli", "server", "sync", "aio"}
        )
        for module, names in _imports().items()
        if _room(module) == "_core"
    }
    assert not any(bad.values()), bad
    bad = {
        module: sorted(n for n in names if _room(n) in {"_cli", "sync", "aio", "_async", "_sync", "_facade"})
        for module, names in _imports().items()
        if _room(module) == "_blocking"
    }
    assert not any(bad.values()), bad


def test_no_import_cycle_between_rooms() -> None:
    assert [" -> ".join(cycle) for cycle in _cycles(_room_graph())] == []


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_graph(root: pathlib.Path, top: str = "openenv") -> dict[str, set[str]]:
    """Module -> the modules of ``root`` it imports, wherever the import stands (in a function too),
    except under ``if TYPE_CHECKING:`` (never run)."""
    modules = {}
    for path in root.rglob("*.py"):
        parts = [top, *path.relative_to(root).with_suffix("").parts]
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = collections.defaultdict(set)
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        stack: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                stack.extend(node.orelse)
                continue
            stack.extend(ast.iter_child_nodes(node))
            for name in _imported(node, package):
                while name and name not in modules:  # ``from .docker import f``: the module docker
                    name = name.rpartition(".")[0]
                if name and name != module and modules[name].name != "__init__.py":
                    if modules[name].parent == path.parent:  # the same folder
                        graph[module].add(name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                found.append([*path[path.index(target) :], module, target] if target in path else [module, target])
            elif target not in state:
                visit(target, [*path, module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    return found


def test_no_import_cycle_inside_a_folder(tmp_path: pathlib.Path) -> None:
    """Between the modules of one folder too, whatever the import's position (``TYPE_CHECKING`` aside).

    ``_blocking/lifetimes.py`` imported ``docker.py`` inside ``prune_containers``, and ``docker.py``
    imported ``lifetimes``: a cycle at run time that the room check above cannot see.
    """
    assert [" -> ".join(cycle) for cycle in _cycles(_module_graph(SRC))] == []
    # the check bites: an import in a function closes a cycle; one under TYPE_CHECKING does not
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "__init__.py").write_text("")
    (probe / "a.py").write_text("from . import b\n")
    (probe / "b.py").write_text("def f():\n    from .a import g\n")
    (probe / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import g\n")
    (probe / "d.py").write_text("from .c import x\n")
    graph = _module_graph(probe, "probe")
    assert _cycles(graph) == [["probe.a", "probe.b", "probe.a"]]
    assert graph["probe.d"] == {"probe.c"} and "probe.c" not in graph


def test_one_loader_for_module_attr_specs() -> None:
    from openenv import _cli, _ray_actor
    from openenv._core import loader

    assert _cli.load_factory is loader.load_factory
    assert getattr(_ray_actor, "load_factory") is loader.load_factory  # noqa: B009 - not re-exported
    assert getattr(_ray_actor, "load_object") is loader.load_object  # noqa: B009
    definers = sorted(
        _module_name(p)
        for p in SRC.rglob("*.py")
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef) and node.name in ("load_factory", "load_object")
    )
    assert definers == ["openenv._core.loader", "openenv._core.loader"]


def _private_reaches(path: pathlib.Path) -> list[str]:
    """``x._name`` on anything but the pool itself, and private names imported, in ``path``.

    The pool itself: ``self``, ``pool`` (the one a constructor builds) and a checkout's ``self._pool``.
    """
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            found += [f"import {alias.name}" for alias in node.names if alias.name.startswith("_")]
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = ast.unparse(node.value)
            if base not in ("self", "pool", "self._pool"):
                found.append(f"{base}.{node.attr} (line {node.lineno})")
    return found


def test_the_pool_drives_its_sessions_only_through_the_connection_seam(tmp_path: pathlib.Path) -> None:
    """``EnvPool`` touches no ``env._*``: it builds, sends, receives and abandons through ``connection``'s seam."""
    for flavour in ("_async", "_sync"):
        path = SRC / flavour / "pool.py"
        assert _private_reaches(path) == [], f"{path} reaches into private names"
    # the check itself bites on what the pool did before
    probe = tmp_path / "pool.py"
    probe.write_text("from .env import _schema_codec\nasync def f(env, sent):\n    env._abandon(sent)\n")
    assert _private_reaches(probe) == ["import _schema_codec", "env._abandon (line 3)"]


def test_contributing_describes_every_room_as_allowed() -> None:
    """CONTRIBUTING's "The rooms" names every room; a single room's "(may import ...)" is its ALLOWED set."""
    import re

    text = (SRC.parent.parent / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("### The rooms", 1)[1].split("\n### ", 1)[0]
    bold = " ".join(re.findall(r"\*\*(.+?)\*\*", section))  # **`_shim_async` / `_shim_sync`**: both
    named = set(re.findall(r"`(\w+)`", bold)) | set(re.findall(r"`(\w+)` may import only", section))
    assert set(ALLOWED) - named == set(), "rooms without a paragraph in CONTRIBUTING.md"
    checked = set()
    paragraph = r"^- \*\*`(\w+)`\*\* \((may import [^)]*|imports nothing of ours)\)"
    for room, allowed in re.findall(paragraph, section, re.M):
        said = set(re.findall(r"`(\w+)`", allowed))
        assert said == ALLOWED[room], f"CONTRIBUTING.md: {room} may import {sorted(said)}, not {sorted(ALLOWED[room])}"
        checked.add(room)
    assert {"_core", "_blocking", "_async", "server", "_cli", "_reaper", "_ray_actor"} <= checked

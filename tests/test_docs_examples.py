"""Every fenced ``python`` block in ``docs/**/*.md`` and ``README.md`` runs, against real local servers.

The examples talk to ``http://localhost:8000`` (or ``127.0.0.1:8000``): an
in-process echo server (:mod:`openenv.server.echo`) started here; port
``8001`` is the built-in tool environment (:mod:`openenv.server.tools_demo`).
Those URLs are replaced by the servers' real ones before a block runs.  A
block with top-level ``await`` / ``async with`` runs in a fresh event loop.

Blocks that cannot run here say so in the Markdown, on the line right before
the fence, so every skip is deliberate and shows up in ``pytest -rs``:

``<!-- docs: skip REASON -->``
    a fragment, or output, or something that cannot run as is.
``<!-- docs: docker -->`` / ``<!-- docs: space -->``
    needs a Docker image / a Hugging Face Space (and the network).
``<!-- docs: requires MODULE:ATTR.PATH[(param)] ... -->``
    runs only once the API exists (written to a contract that is being built
    on another branch); skipped, with the missing name, until then.
``<!-- docs: continue -->``
    runs after the previous block of the same page, in the same namespace.

A marker may be combined with ``continue`` (``<!-- docs: continue requires ... -->``).
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import inspect
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from openenv.server import EnvServer
from openenv.server.echo import EchoEnvironment
from openenv.server.tools_demo import ToolsDemoEnvironment

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)[^\n]*$")
MARKER = re.compile(r"^\s*<!--\s*docs:\s*(?P<body>.*?)\s*-->\s*$")
KINDS = ("skip", "docker", "space", "requires", "continue")

# README.md is edited by the lead; until its blocks carry markers, these (matched by
# their first code line) are listed here, with the marker each should get.
README_PENDING: dict[str, str] = {}  # README blocks not marked yet (none)


@dataclass
class Block:
    path: Path
    id: str  # "docs/guides/typed.md:12": the page and the line of the opening fence
    code: str
    kinds: dict[str, str] = field(default_factory=dict)
    previous: Block | None = None


def _markdown_files() -> list[Path]:
    files = sorted(p for p in (ROOT / "docs").rglob("*.md") if "_hooks" not in p.parts)
    return [*files, ROOT / "README.md"]


def _parse_marker(body: str, where: str) -> dict[str, str]:
    kinds: dict[str, str] = {}
    words = body.split()
    i = 0
    while i < len(words):
        word = words[i]
        if word not in KINDS:
            raise ValueError(f"{where}: unknown docs marker {word!r} (known: {', '.join(KINDS)})")
        if word == "continue":
            kinds["continue"] = ""
            i += 1
            continue
        rest = words[i + 1 :]
        if word == "requires":
            specs = [w for w in rest if ":" in w]
            if not specs:
                raise ValueError(f"{where}: 'requires' needs MODULE:ATTR names")
            kinds["requires"] = " ".join(specs)
            i += 1 + len(specs)
            continue
        kinds[word] = " ".join(rest)
        if word == "skip" and not kinds[word]:
            raise ValueError(f"{where}: 'skip' needs a reason")
        break
    return kinds


def collect(path: Path, root: Path = ROOT) -> Iterator[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    previous: Block | None = None
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, lang = match.group("indent"), match.group("fence"), match.group("lang").lower()
        start = i
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1
        if lang not in ("python", "py", "python3"):
            continue
        code = textwrap.dedent("\n".join(line[len(indent) :] if line.startswith(indent) else line for line in body))
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        kinds: dict[str, str] = {}
        marker = MARKER.match(lines[j]) if j >= 0 else None
        if marker:
            kinds = _parse_marker(marker.group("body"), f"{path.relative_to(root)}:{j + 1}")
        where = f"{path.relative_to(root)}:{start + 1}"
        block = Block(path, where, code, kinds, previous if "continue" in kinds else None)
        if "continue" in kinds and previous is None:
            raise ValueError(f"{block.id}: 'continue' with no block before it")
        previous = block
        yield block


BLOCKS = [block for path in _markdown_files() for block in collect(path)]


def _missing(spec: str) -> str | None:
    """None if ``MODULE:ATTR.PATH[(param)]`` exists, else what is missing."""
    module_name, _, rest = spec.partition(":")
    param = None
    if rest.endswith(")") and "(" in rest:
        rest, _, param = rest[:-1].partition("(")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in rest.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return spec
    if param:
        try:
            parameters = inspect.signature(obj).parameters
        except (TypeError, ValueError):
            return spec
        if param not in parameters:
            return spec
    return None


def _skip_reason(block: Block) -> str | None:
    chain = [block]
    while chain[-1].previous is not None:
        chain.append(chain[-1].previous)
    for item in chain:
        kinds = item.kinds
        if "skip" in kinds:
            return f"marked skip: {kinds['skip']}"
        if "docker" in kinds:
            return "marked docker: needs a Docker image" + (f" ({kinds['docker']})" if kinds["docker"] else "")
        if "space" in kinds:
            return "marked space: needs a Hugging Face Space and the network"
        for spec in kinds.get("requires", "").split():
            if _missing(spec):
                return f"marked requires: {spec} does not exist yet"
    if block.path.name == "README.md" and not block.kinds:
        first = next((line for line in block.code.splitlines() if line.strip() and not line.startswith("#")), "")
        for prefix, reason in README_PENDING.items():
            if first.startswith(prefix):
                return f"README block not marked yet: {reason}"
    return None


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    with (
        EnvServer(EchoEnvironment, port=0, max_sessions=64) as echo,
        EnvServer(ToolsDemoEnvironment, port=0, max_sessions=64) as tools,
    ):
        yield {"8000": echo.url, "8001": tools.url}


def _substitute(code: str, urls: dict[str, str]) -> str:
    for port, url in urls.items():
        code = re.sub(rf"(?:http|ws)://(?:localhost|127\.0\.0\.1):{port}\b", url, code)
    return code


def _run(code: str, name: str, namespace: dict[str, Any]) -> None:
    compiled = compile(code, name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    if compiled.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(compiled, namespace))  # top-level await: a fresh event loop per block
    else:
        exec(compiled, namespace)


@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_example(block: Block, servers: dict[str, str]) -> None:
    reason = _skip_reason(block)
    if reason:
        pytest.skip(f"{block.id}: {reason}")
    chain = [block]
    while chain[-1].previous is not None:
        chain.append(chain[-1].previous)
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    for item in reversed(chain):
        _run(_substitute(item.code, servers), item.id, namespace)


def test_examples_found() -> None:
    """The extractor sees the blocks (a broken fence regex must not pass as 'nothing to run')."""
    pages = {block.path for block in BLOCKS}
    assert len(BLOCKS) >= 20, [block.id for block in BLOCKS]
    assert ROOT / "docs" / "quickstart.md" in pages
    assert ROOT / "README.md" in pages


def test_extractor_reads_markers_and_tabs(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        '=== "Sync"\n\n    ```python\n    x = 1\n    ```\n\n<!-- docs: continue -->\n```python\nassert x == 1\n```\n\n'
        "<!-- docs: skip a fragment -->\n```py\nundefined\n```\n\n```bash\nnot python\n```\n",
        encoding="utf-8",
    )
    blocks = list(collect(page, root=tmp_path))
    assert [b.code for b in blocks] == ["x = 1", "assert x == 1", "undefined"]
    assert blocks[1].previous is blocks[0]
    assert blocks[2].kinds == {"skip": "a fragment"}


def test_requires_marker_checks_names_and_parameters() -> None:
    assert _missing("openenv.sync:Env.step") is None
    assert _missing("openenv.sync:Env.list_tools(self)") is None
    assert _missing("openenv.sync:Env.no_such_method") == "openenv.sync:Env.no_such_method"
    assert _missing("openenv.sync:Env.step(no_such_param)") == "openenv.sync:Env.step(no_such_param)"
    with pytest.raises(ValueError, match="unknown docs marker"):
        _parse_marker("skipp reason", "x")
    with pytest.raises(ValueError, match="needs a reason"):
        _parse_marker("skip", "x")


def test_docstrings_are_markdown() -> None:
    """The API reference renders docstrings as Markdown (Google style): no Sphinx roles, no ``::`` blocks."""
    role = re.compile(r":(?:py:)?(?:class|exc|meth|func|mod|attr|data|obj|const):`")
    literal = re.compile(r"\S::\s*$", re.MULTILINE)
    found = []
    for path in sorted((ROOT / "src" / "openenv").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT)
        found += [f"{rel}: {m.group(0)}" for m in role.finditer(text)]
        found += [f"{rel}: '{m.group(0).strip()}'" for m in literal.finditer(text)]
    assert not found, "use [`Name`][openenv.sync.Name] and fenced blocks instead:\n" + "\n".join(found)

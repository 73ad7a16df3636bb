"""Every fenced ``python`` block in ``docs/**/*.md`` and ``README.md`` runs, against real local servers.

The examples talk to ``http://localhost:8000`` (or ``127.0.0.1:8000``) and
``:8001``. Each page's examples run against the server command the page itself
shows: the first ``python -m openenv serve ... --port 8000`` (or ``8001``) on
the page, in a code block or inline code, started here exactly as written, as a
subprocess, except ``--port 0`` so that it never races for a fixed port (and
without ``$MAX_CONCURRENT_ENVS``: the page's defaults are the ones a user gets).
A page that shows no command for a port runs against the quick start's
(``docs/quickstart.md``, 8000) or the tools guide's (``docs/guides/tools.md``,
8001) command. The URLs are replaced by the servers' real ones before a block
runs. Each block runs as a reader runs it: saved to a file (after the blocks
it continues) and run with ``python`` in a fresh interpreter, in an empty
folder; so a top-level ``await`` or ``async with`` fails, as it does for the
reader (wrap it in ``async def main()`` + ``asyncio.run(main())``). The blocks
run in parallel under pytest-xdist (``nox -s docs``).

Blocks that cannot run here say so in the Markdown, on the line right before
the fence, so every skip is deliberate and shows up in ``pytest -rs``:

``<!-- docs: skip REASON -->``
    a fragment, or output, or something that cannot run as is.
``<!-- docs: docker IMAGE -->``
    needs the Docker image ``IMAGE``, built by a command the page gives
    (``python3 scripts/docker_setup.py --echo-only`` for ``echo-env:latest``):
    runs when the local engine has the image and ``$OPENENV_DOCS_DOCKER`` is set (``nox -s docs``
    sets it: the other suites start no container), skipped otherwise (nothing is pulled).
``<!-- docs: space -->``
    needs a Hugging Face Space and the network.
``<!-- docs: extra NAME -->``
    needs the package's extra ``NAME`` (``pip install '.[server]'``), which the
    page tells the reader to install: runs when its modules import, skipped otherwise.
``<!-- docs: requires MODULE:ATTR.PATH[(param)] ... -->``
    runs only once the API exists (written to a contract that is being built
    on another branch); skipped, with the missing name, until then.
``<!-- docs: continue -->``
    runs after the previous block of the same page, in the same namespace.

A marker may be combined with ``continue`` (``<!-- docs: continue requires ... -->``).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import queue
import re
import shlex
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)[^\n]*$")
MARKER = re.compile(r"^\s*<!--\s*docs:\s*(?P<body>.*?)\s*-->\s*$")
KINDS = ("skip", "docker", "space", "requires", "continue", "extra")
#: ``<!-- docs: extra NAME -->``: the modules the package's extra NAME installs (the page says to install it)
EXTRAS = {"server": ("starlette", "uvicorn")}
#: ``python -m openenv serve ARGS`` in a code line or inline code (up to a comment or the closing backtick)
SERVE = re.compile(r"python3? -m openenv serve (?P<args>[^`#\n]*[^`#\n\s])")
PORTS = ("8000", "8001")
#: where a page that shows no server command for a port finds it
DEFAULT_SERVER_PAGES = {"8000": ROOT / "docs" / "quickstart.md", "8001": ROOT / "docs" / "guides" / "tools.md"}

#: the command the pages give for the image their docker blocks use (echo-env:latest)
BUILD_ECHO = "python3 scripts/docker_setup.py --echo-only"

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
    return [*files, ROOT / "README.md", ROOT / "README.pypi.md"]


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
            image = kinds["docker"].split()[0] if kinds["docker"] else ""
            if not image:
                return "marked docker: needs a Docker image"
            if not os.environ.get("OPENENV_DOCS_DOCKER"):
                return f"marked docker: needs {image}; run by nox -s docs (OPENENV_DOCS_DOCKER=1) when it is built"
            if not _image_present(image):
                return f"marked docker: needs the image {image}, not built here (build it with `{BUILD_ECHO}`)"
        if "space" in kinds:
            return "marked space: needs a Hugging Face Space and the network"
        extra = kinds.get("extra", "")
        missing = [m for m in EXTRAS.get(extra, ()) if importlib.util.find_spec(m) is None]
        if missing:
            return f"marked extra {extra}: needs pip install '.[{extra}]' ({', '.join(missing)} not installed)"
        for spec in kinds.get("requires", "").split():
            if _missing(spec):
                return f"marked requires: {spec} does not exist yet"
    if block.path.name == "README.md" and not block.kinds:
        first = next((line for line in block.code.splitlines() if line.strip() and not line.startswith("#")), "")
        for prefix, reason in README_PENDING.items():
            if first.startswith(prefix):
                return f"README block not marked yet: {reason}"
    return None


#: set (``nox -s docs -- --only-docker-blocks``, as CI runs it): run only the blocks marked ``docker``, the
#: ones no suite runs; every other block runs in ``nox -s tests`` on the same interpreter already
ONLY_DOCKER_ENV = "OPENENV_DOCS_ONLY_DOCKER"


def _needs_docker(block: Block) -> bool:
    """Whether ``block`` or a block it continues is marked ``docker``."""
    item: Block | None = block
    while item is not None:
        if "docker" in item.kinds:
            return True
        item = item.previous
    return False


def _image_present(image: str) -> bool:
    """Whether the local Docker engine has ``image`` (a docker block runs only then; nothing is pulled)."""
    if image not in _IMAGES:
        try:
            found = subprocess.run(["docker", "image", "inspect", image], capture_output=True, timeout=30)
            _IMAGES[image] = found.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _IMAGES[image] = False
    return _IMAGES[image]


_IMAGES: dict[str, bool] = {}


def page_server_commands(path: Path) -> dict[str, list[str]]:
    """The first ``serve`` command shown for each port on a page, as the argument list after ``serve``."""
    commands: dict[str, list[str]] = {}
    for match in SERVE.finditer(path.read_text(encoding="utf-8")):
        args = shlex.split(match.group("args"))
        if args and args[-1] == "&":  # run in the background, as the TRL guide's shell lines are
            args.pop()
        port = next((args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "--port"), None)
        if port in PORTS and port not in commands:
            commands[port] = args
    return commands


def server_commands(path: Path) -> dict[str, list[str]]:
    """The page's own commands, and the default pages' for the ports it shows none for."""
    commands = page_server_commands(path)
    for port, page in DEFAULT_SERVER_PAGES.items():
        if port not in commands:
            commands[port] = page_server_commands(page)[port]
    return commands


class _ServeProcess:
    """``python -m openenv serve ARGS`` with ``--port 0``; ``url`` from its ready line."""

    def __init__(self, args: list[str]) -> None:
        args = [("0" if i > 0 and args[i - 1] == "--port" else arg) for i, arg in enumerate(args)]
        env = {k: v for k, v in os.environ.items() if k != "MAX_CONCURRENT_ENVS"}
        self.command = "python -m openenv serve " + shlex.join(args)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "openenv", "serve", *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: queue.Queue[str | None] = queue.Queue()
        self.output: list[str] = []

        def pump() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.output.append(line)
                lines.put(line)
            lines.put(None)

        self.reader = threading.Thread(target=pump, daemon=True)
        self.reader.start()
        while True:
            try:
                line = lines.get(timeout=60)
            except queue.Empty:
                line = None
            if line is None:
                self.close()
                raise RuntimeError(f"{self.command!r} never became ready: {''.join(self.output)[-2000:]}")
            if line.startswith("serving ") and " on " in line:
                self.url = line.rsplit(" on ", 1)[1].strip()
                return

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.reader.join(5)
            assert self.proc.stderr is not None
            self.proc.stderr.close()


class Servers:
    """One process per distinct command, started when a page first needs it."""

    def __init__(self) -> None:
        self._running: dict[tuple[str, ...], _ServeProcess] = {}

    def urls(self, path: Path, code: str) -> dict[str, str]:
        """The real URLs of the servers ``code`` talks to (the ports it names), started as ``path`` shows."""
        urls = {}
        for port, args in server_commands(path).items():
            if not re.search(rf"(?:http|ws)://(?:localhost|127\.0\.0\.1):{port}\b", code):
                continue
            key = tuple(args)
            if key not in self._running:
                self._running[key] = _ServeProcess(args)
            urls[port] = self._running[key].url
        return urls

    def close(self) -> None:
        for server in self._running.values():
            server.close()
        self._running.clear()


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    running = Servers()
    try:
        yield running
    finally:
        running.close()


def _substitute(code: str, urls: dict[str, str]) -> str:
    for port, url in urls.items():
        code = re.sub(rf"(?:http|ws)://(?:localhost|127\.0\.0\.1):{port}\b", url, code)
    return code


#: a block's own run, as a reader's ``python example.py``: generous, since CI loads the machine
BLOCK_TIMEOUT = 120


def program(block: Block) -> str:
    """The file a reader saves: the block, after the blocks it continues (a page's ``continue``)."""
    chain = [block]
    while chain[-1].previous is not None:
        chain.append(chain[-1].previous)
    return "\n\n".join(item.code for item in reversed(chain)) + "\n"


def run_as_a_file(code: str, directory: Path, name: str = "example.py") -> subprocess.CompletedProcess[str]:
    """``python example.py`` in a fresh interpreter, in an empty folder, as a reader runs a pasted block."""
    path = directory / name
    path.write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    return subprocess.run(
        [sys.executable, str(path)],
        cwd=directory,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
    )


@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_example(block: Block, servers: Servers, tmp_path: Path) -> None:
    """Each block, saved to a file and run with ``python``, exits 0 (a file has no top-level ``await``)."""
    reason = _skip_reason(block)
    if reason:
        pytest.skip(f"{block.id}: {reason}")
    if os.environ.get(ONLY_DOCKER_ENV) and not _needs_docker(block):
        pytest.skip(f"{block.id}: runs in the suite (nox -s tests); ${ONLY_DOCKER_ENV} runs the docker blocks only")
    code = program(block)
    urls = servers.urls(block.path, code)
    done = run_as_a_file(_substitute(code, urls), tmp_path)
    assert done.returncode == 0, (
        f"{block.id}, saved to a file and run with python, exited {done.returncode}:\n"
        f"{done.stderr[-3000:]}\n--- the program ---\n{code}"
    )


def test_the_quick_start_and_the_readme_show_their_servers() -> None:
    """The commands the examples run against are written where a newcomer reads them."""
    quick = page_server_commands(ROOT / "docs" / "quickstart.md")
    assert quick["8000"] == ["echo", "--port", "8000"]
    tools = page_server_commands(ROOT / "docs" / "guides" / "tools.md")
    assert tools["8001"] == ["openenv.server.tools_demo:ToolsDemoEnvironment", "--port", "8001"]
    readme = page_server_commands(ROOT / "README.md")
    assert readme == {"8000": quick["8000"], "8001": tools["8001"]}


def test_page_server_commands(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Start `python -m openenv serve my.mod:Env --port 8001 --max-sessions 4 &` first.\n\n"
        "```bash\npython -m openenv serve echo --port 8000  # the echo\n"
        "python -m openenv serve other:Env --port 8000\npython -m openenv serve MODULE:FACTORY\n```\n",
        encoding="utf-8",
    )
    assert page_server_commands(page) == {
        "8000": ["echo", "--port", "8000"],
        "8001": ["my.mod:Env", "--port", "8001", "--max-sessions", "4"],
    }
    empty = tmp_path / "empty.md"
    empty.write_text("no servers here\n", encoding="utf-8")
    assert server_commands(empty) == {port: page_server_commands(DEFAULT_SERVER_PAGES[port])[port] for port in PORTS}


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


def test_a_pasted_top_level_async_with_fails_as_it_does_for_a_reader(tmp_path: Path) -> None:
    """The runner is a reader's ``python example.py``: no top-level await, an empty folder, a fresh interpreter."""
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nfrom openenv.aio import Env\n\nasync with Env('http://127.0.0.1:9') as env:\n    pass\n```\n\n"
        "```python\nimport os, sys\nassert 'openenv' not in sys.modules and os.listdir('.') == ['example.py']\n```\n",
        encoding="utf-8",
    )
    pasted, clean = collect(page, root=tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    done = run_as_a_file(program(pasted), tmp_path / "a")
    assert done.returncode == 1 and "SyntaxError: 'async with' outside async function" in done.stderr
    assert run_as_a_file(program(clean), tmp_path / "b").returncode == 0


def _shell_lines(path: Path) -> list[tuple[int, str]]:
    """The command lines of a page's ``bash``/``sh``/``console`` blocks, with their line numbers."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found, lang = [], None
    for number, line in enumerate(lines, 1):
        match = FENCE.match(line)
        if match:
            lang = match.group("lang").lower() if lang is None else None
            continue
        if lang in ("bash", "sh", "shell", "console") and line.strip() and not line.lstrip().startswith("#"):
            found.append((number, line.strip().removeprefix("$ ")))
    return found


#: a command a venv provides (the system's ``python3`` only creates the venv and runs stdlib scripts)
VENV_COMMAND = re.compile(r"(?:^|&&\s*|;\s*)(python|pip|nox|mkdocs|pytest)\b(?! -m venv)")


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_shell_commands_fit_the_page_s_shell(path: Path) -> None:
    """A page that creates ``.venv`` without activating it runs everything as ``.venv/bin/...``.

    (The README's quick start is one line that never activates the venv, so its
    later commands must not assume an activated one; the quick start page
    activates it, and the guides follow it.)
    """
    commands = _shell_lines(path)
    text = "\n".join(line for _, line in commands)
    if ".venv/bin/" not in text or "activate" in text:
        return
    bare = [f"{path.name}:{number}: {line}" for number, line in commands if VENV_COMMAND.search(line)]
    assert not bare, "the page never activates its .venv: use .venv/bin/... in\n" + "\n".join(bare)


def test_pages_say_how_to_build_the_images_they_use() -> None:
    """A ``docker`` block names its image, and its page gives the command that builds it."""
    missing = []
    for block in BLOCKS:
        if "docker" not in block.kinds:
            continue
        image = (block.kinds["docker"].split() or [""])[0]
        if image != "echo-env:latest":
            missing.append(f"{block.id}: the docker marker names {image!r}, not an image the docs can build")
        elif BUILD_ECHO not in block.path.read_text(encoding="utf-8"):
            missing.append(f"{block.id}: uses {image} and its page never says `{BUILD_ECHO}`")
    assert not missing, "\n".join(missing)


def test_pages_say_how_to_install_the_extras_they_use() -> None:
    """A block marked ``extra NAME`` is on a page that gives the install command of that extra."""
    missing = [
        f"{block.id}: needs the {block.kinds['extra']!r} extra and its page never says pip install '.[...]'"
        for block in BLOCKS
        if "extra" in block.kinds
        and f"pip install '.[{block.kinds['extra']}]'" not in block.path.read_text(encoding="utf-8")
    ]
    unknown = [
        f"{b.id}: unknown extra {b.kinds['extra']!r}" for b in BLOCKS if b.kinds.get("extra", "server") not in EXTRAS
    ]
    assert not missing and not unknown, "\n".join(missing + unknown)


def test_every_block_compiles_as_a_file() -> None:
    """Skipped blocks too: none has a top-level ``await`` / ``async with``, which no file can run."""
    broken = []
    for block in BLOCKS:
        try:
            compile(program(block), block.id, "exec", dont_inherit=True)
        except SyntaxError as exc:
            broken.append(f"{block.id}: {exc.msg}: {(exc.text or '').strip()}")
    assert not broken, "wrap it in async def main() + asyncio.run(main()):\n" + "\n".join(broken)

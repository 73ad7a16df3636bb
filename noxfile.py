"""Every developer task is a nox session.

    nox -s lint typecheck tests      what CI runs (see README and .ci/run)
    nox -s unasync                   regenerate src/openenv/_sync and tests/_sync
    nox -s unasync -- --check        verify the generated twin is up to date
    nox -s docker                    set up a Docker engine + test images, run -m docker
    nox -s interop                   run -m interop (released OpenEnv packages)
    nox -s ray                       start a local Ray cluster, run -m ray (RayProvider)
    nox -s build                     sdist + wheel, install the wheel in a fresh venv, import
    nox -s demo                      python -m openenv run
    nox -s docs                      build the documentation site (strict) and run its examples
    nox -s soak                      long soak: 48 sessions, leaks and cross-talk (bench/SOAK.md)
    nox -s matrix                    the support matrix: Python 3.10-3.13, lowest and highest dependencies

Sessions run on the interpreter that runs nox and reuse their virtualenvs, except
`matrix`, whose legs need python3.10 ... python3.13 on PATH (.ci/run puts pyenv's there).
.ci/run runs the sessions side by side in lanes and skips the leg that `nox -s tests`
already is: the whole suite on its own Python with the default dependencies (3.11 there).

The suite runs in parallel (pytest-xdist, PARALLEL below): it waits on timeouts, restarts
and proxies, with the CPU near 5 %, so several worker processes share the two cores. Tests
marked `serial` run alone (tests/conftest.py); `-- -n 0` runs everything in one process.

The matrix legs each prove one thing (MATRIX_LEGS), so not every leg repeats the whole suite:

    3.10-lowest        whole suite: the oldest Python (the pre-3.11 shim branches) on every
                       floor (websockets 15.0, httpx 0.27, pydantic 2.7, docker 7.0)
    3.11-default       subset: the interpreter, websockets 17 and the newest dependencies 3.11
                       gets (in CI: `nox -s tests`, the whole suite on 3.11, stands for it)
    3.12-websockets16  subset: the websockets 16 line (the newest 16.x), every embedded server
                       on the threading transport (the other one that ships:
                       $OPENENV_SERVER_TRANSPORT=threads)
    3.13-highest       whole suite: the newest Python with every dependency upgraded to its newest

So every supported Python, every websockets line (15, 16, 17 and the newest) and both server
transports pass on each run. The subset leaves out MATRIX_SUBSET_IGNORE: tooling checks that do
not depend on the interpreter or the dependency versions (docs, codegen, TRL), the long stress runs
(soak, fuzz, properties) and the fault suites. The fault suites are about our own deadlines and
retries; they run on both sides of the shims' 3.11 branch in the whole-suite legs (and in
`nox -s tests`), on the websockets 15 and 17 lines; the websockets 16 line runs the rest of the
suite, tests/test_websockets_internals.py (every private websockets attribute we touch) among it.
(A 3.10 leg on the newest 3.10 dependencies, websockets 16 then, ran the suite a fifth time; its
websockets line is the 3.12 leg's now.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nox
import nox.virtualenv

# uv builds the session venvs and installs into them wherever nox finds it (`pip install "nox[uv]"`,
# as .ci/run does): its installs take seconds where pip's took minutes on a loaded CI machine, most of
# a leg's setup. Without uv, venv + pip as before. `nox -db venv` forces pip. The trl session gives uv the
# wheel directories pip's configuration names (TRL_DEPS: torch, a CPU build in the machine's own directory).
nox.options.default_venv_backend = "uv|venv"
# uv never downloads an interpreter: a missing python3.X fails the leg (--error-on-missing-interpreters)
os.environ.setdefault("UV_PYTHON_DOWNLOADS", "never")
# Bytecode. The suites start many fresh interpreters (servers, CLI runs, children, released clients
# and servers). Where PYTHONDONTWRITEBYTECODE is set (these machines' default), no interpreter writes the
# bytecode of what it imports, so each would compile every module it imports again (our stack: 0.95 s of
# CPU to import that way, 0.41 s compiled; openenv-core 0.3.0's server, FastAPI and gradio: 9.5 s, 4.7 s):
# then uv compiles everything it installs, as pip does. Where it is not set (.ci/run unsets it), the first
# interpreter that imports a module writes its bytecode and the others read it: installs skip compiling
# (uv by default; pip: PIP_COMPILE=0), which is cheaper, since most installed modules are never imported
# (compiling all of openenv-core 0.3.0's venv, 8,700 files: 27 s of CPU, in each of five release venvs).
if os.environ.get("PYTHONDONTWRITEBYTECODE"):
    os.environ.setdefault("UV_COMPILE_BYTECODE", "1")
else:
    os.environ.setdefault("PIP_COMPILE", "0")
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "typecheck", "tests"]

ROOT = Path(__file__).resolve().parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
TEST_DEPS = nox.project.dependency_groups(PYPROJECT, "test")
# transformers, for tests/test_trl.py's check with its own get_json_schema (never a runtime dependency)
TRL_TEST_DEPS = nox.project.dependency_groups(PYPROJECT, "trl-test")
DOCS_DEPS = nox.project.dependency_groups(PYPROJECT, "docs")

# The generator's output is what --check compares: pin it (scripts/run_unasync.py
# refuses any other version). unasync imports setuptools, which venvs stopped
# shipping with Python 3.12.
CODEGEN = ["unasync==0.6.0"] + (["setuptools"] if sys.version_info >= (3, 12) else [])
# Pinned so that lint and type results do not change under our feet.
RUFF = "ruff==0.17.6"
MYPY = "mypy==2.4.1"

GENERATED = ["src/openenv/_sync", "tests/_sync"]

# ---------------------------------------------------------------------------
# The support matrix (nox -s matrix). README's "Supported" line states it.
# ---------------------------------------------------------------------------
#: The floors of [project].dependencies, pinned exactly for the "lowest" leg (pip has no
#: lowest-version resolution). _check_lowest() fails the session when they drift from pyproject.
LOWEST = {"websockets": "15.0", "httpx": "0.27.0", "pydantic": "2.7.0", "docker": "7.0.0"}
#: Test files left out on the legs that run a subset (see the module docstring): long-running
#: soak/fuzz/property tests, tooling checks (docs build, codegen, TRL, the pre-commit hook) that do
#: not depend on the interpreter or the dependency versions, and the fault suites (our deadlines and
#: retries, run on both sides of the shims' 3.11 branch by the whole-suite legs). The legs that matter
#: most (3.10 on every floor, the newest everything) run the whole suite, as `nox -s tests` does.
MATRIX_SUBSET_IGNORE = [
    "tests/test_soak.py",
    "tests/test_server_fuzz.py",
    "tests/test_properties.py",
    "tests/test_docs_examples.py",
    "tests/test_codegen.py",
    "tests/test_trl.py",
    "tests/test_twin_hook.py",
    "tests/_async/test_faults.py",
    "tests/_sync/test_faults.py",
]
#: (python, dependencies, whole suite?) per leg: "lowest" pins LOWEST, "highest" upgrades
#: everything to the newest release, "default" is what the installer resolves for that Python, a
#: name of LINES holds one package to an older major line.
# (python, dependencies, whole suite, the embedded server's transport: $OPENENV_SERVER_TRANSPORT)
MATRIX_LEGS = [
    ("3.10", "lowest", True, "asyncio"),
    ("3.11", "default", False, "asyncio"),
    ("3.12", "websockets16", False, "threads"),
    ("3.13", "highest", True, "asyncio"),
]
#: the legs on an older major line of one dependency (its newest release there): name -> (package, major)
LINES = {"websockets16": ("websockets", 16)}


def _xdist(workers: int) -> list[str]:
    """pytest-xdist arguments: ``workers`` processes unless $OPENENV_TEST_WORKERS says otherwise.

    `loadgroup` keeps the tests marked ``xdist_group(name)`` on one worker; `-- -n 0` after a
    session runs one process (CONTRIBUTING.md, "Parallel tests").
    """
    return ["-n", os.environ.get("OPENENV_TEST_WORKERS", str(workers)), "--dist", "loadgroup"]


#: The suite and the docker suite mostly wait (timeouts, restarts, proxies, containers starting), so
#: they get more workers than the two cores; interop is CPU-bound (every released client or server is
#: a fresh interpreter importing its stack), each scenario's servers in one worker (xdist_group,
#: tests/interop/conftest.py): three workers, so that beside CI's other lanes it is not the last to end
#: (with two, 1,260 s of pytest where the other lanes' steps took 1,230 s at most).
PARALLEL = _xdist(6)
PARALLEL_DOCKER = _xdist(3)
PARALLEL_INTEROP = _xdist(3)

# Run pytest so that "no tests collected" (exit 5) fails loudly instead of passing.
_PYTEST = """
import sys
import pytest
code = int(pytest.main(sys.argv[1:]))
if code == 5:
    print("nox: pytest collected no tests for this selection; failing", file=sys.stderr)
sys.exit(code)
"""


def _pip_for(session: nox.Session) -> list[str]:
    """``["pip"]`` in a venv that uv built (it has no pip), for a session whose steps run ``python -m pip``."""
    return ["pip"] if session.venv_backend == "uv" else []


def _compile_tree(session: nox.Session) -> None:
    """Compile this checkout's own modules to bytecode for the session's interpreter, as UV_COMPILE_BYTECODE
    does for what uv installs. Where PYTHONDONTWRITEBYTECODE is set (these machines), no interpreter writes
    its own, so each server, CLI run and child a suite starts compiled every module of ``src`` and ``tests``
    it imports again: 0.25 s of CPU per process, 17% of the suite's child-process CPU (241 s -> 199 s).
    An interpreter reads bytecode whatever PYTHONDONTWRITEBYTECODE says."""
    session.run("python", "-m", "compileall", "-q", "-j", "0", "src", "tests", "examples", silent=True)


def _warm_rewrites(session: nox.Session, args: tuple[str, ...]) -> None:
    """Collect the run's tests once with bytecode writing on, so that pytest caches its rewritten test modules.

    pytest rewrites every test module's asserts on import and caches the result only where bytecode may be
    written; under PYTHONDONTWRITEBYTECODE each xdist worker rewrote all of them again: 8 s of CPU to collect
    the suite, 2.4 s with the cache, in each of a session's workers (about 30 of them in a CI run). Only this
    collection writes; the run itself keeps the caller's setting.
    """
    skip = {"-n", "--dist", "--durations"}
    kept = [a for i, a in enumerate(args) if a not in skip and (i == 0 or args[i - 1] not in skip)]
    session.run(
        "python",
        *("-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *kept),
        env={"PYTHONDONTWRITEBYTECODE": ""},
        silent=True,
        success_codes=[0, 5],
    )


def _pytest(session: nox.Session, *args: str) -> None:
    _compile_tree(session)
    if "-n" in args:
        _warm_rewrites(session, args)
    # in CI, each session's log ends with its slowest tests: where the time of a run goes
    durations = ["--durations=15"] if os.environ.get("CI") else []
    session.run("python", "-c", _PYTEST, *durations, *args)


@nox.session
def unasync(session: nox.Session) -> None:
    """Regenerate the sync twin; `-- --check` only verifies it."""
    session.install(*CODEGEN)
    session.run("python", "scripts/run_unasync.py", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """LOWEST = pyproject's floors, generated twin up to date, then ruff check and ruff format --check."""
    problems = _check_lowest()
    if problems:
        session.error("noxfile LOWEST is out of step with pyproject.toml: " + "; ".join(problems))
    session.install(*CODEGEN, RUFF)
    session.run("python", "scripts/run_unasync.py", "--check")
    excludes = [arg for tree in GENERATED for arg in ("--extend-exclude", tree)]
    session.run("ruff", "check", *excludes, ".")
    trees = [tree for tree in GENERATED if (ROOT / tree).is_dir()]
    if trees:
        # generated code is never formatted or restyled: only pyflakes (F) applies
        session.run("ruff", "check", "--select", "F", *trees)
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy over src (both twins) and tests; configured in pyproject.toml."""
    session.install("-e", ".[docker]", *TEST_DEPS, MYPY)
    session.run("mypy", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """Everything except the docker, interop and ray suites, in parallel (PARALLEL); extra args go to pytest."""
    session.install("-e", ".[docker]", *TEST_DEPS, *TRL_TEST_DEPS)
    # the whole suite on this Python with what pip resolves: .ci/run counts it as that matrix leg
    session.run("python", "-c", _VERSIONS, "tests")
    _pytest(session, "-m", "not docker and not interop and not ray", *PARALLEL, *session.posargs)


# What a test session runs on (printed before its tests; argv[1] names the session).
_VERSIONS = """
import sys, websockets, httpx, pydantic, docker
print(sys.argv[1] + ": Python", sys.version.split()[0], "| websockets", websockets.__version__,
      "| httpx", httpx.__version__, "| pydantic", pydantic.VERSION, "| docker", docker.__version__)
"""


def _check_lowest() -> list[str]:
    """Where LOWEST differs from the ``>=`` floors of pyproject's [project].dependencies."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    floors: dict[str, str] = {}
    for line in PYPROJECT["project"]["dependencies"]:
        req = Requirement(line)
        for spec in req.specifier:
            if spec.operator == ">=":
                floors[req.name] = spec.version
    problems = [
        f"{name}: pyproject says >={floor}, LOWEST pins {LOWEST.get(name)}"
        for name, floor in floors.items()
        if name not in LOWEST or Version(LOWEST[name]) != Version(floor)
    ]
    problems += [f"{name}: pinned in LOWEST but has no floor in pyproject" for name in LOWEST if name not in floors]
    return problems


@nox.session(name="matrix")
@nox.parametrize(
    "python,deps,whole,transport",
    [nox.param(py, deps, whole, transport, id=f"{py}-{deps}") for py, deps, whole, transport in MATRIX_LEGS],
)
def matrix(session: nox.Session, deps: str, whole: bool, transport: str) -> None:
    """One leg of the support matrix: the non-docker, non-interop suite on one Python and dependency set.

    `nox -s matrix` runs every leg, `nox -s "matrix(3.10-lowest)"` one. Extra args go to pytest.
    """
    problems = _check_lowest()
    if problems:
        session.error("noxfile LOWEST is out of step with pyproject.toml: " + "; ".join(problems))
    # the whole-suite legs run tests/test_trl.py, which reads our tool schemas back with transformers
    deps_of_leg = [*TEST_DEPS, *(TRL_TEST_DEPS if whole else [])]
    if deps == "lowest":
        constraints = Path(session.create_tmp()) / "lowest-constraints.txt"
        constraints.write_text("".join(f"{name}=={version}\n" for name, version in LOWEST.items()))
        session.install("-e", ".", *deps_of_leg, "-c", str(constraints))
    elif deps == "highest":
        # uv's --upgrade upgrades every package, as pip's eager strategy does
        eager = [] if session.venv_backend == "uv" else ["--upgrade-strategy", "eager"]
        session.install("--upgrade", *eager, "-e", ".", *deps_of_leg)
    elif deps in LINES:
        package, major = LINES[deps]
        session.install("-e", ".", *deps_of_leg, f"{package}>={major},<{major + 1}")
    else:
        session.install("-e", ".", *deps_of_leg)
    session.env["OPENENV_SERVER_TRANSPORT"] = transport  # every server the tests start (in-process or not)
    session.run("python", "-c", _VERSIONS, f"matrix leg (server transport: {transport})")
    if deps == "lowest":
        session.run("python", "-c", _ASSERT_LOWEST, *(f"{n}=={v}" for n, v in LOWEST.items()))
    if deps in LINES:
        session.run("python", "-c", _ASSERT_LINE, *map(str, LINES[deps]))
    ignore = [] if whole else [f"--ignore={path}" for path in MATRIX_SUBSET_IGNORE]
    _pytest(
        session,
        "-m",
        "not docker and not interop and not ray",
        "-p",
        "no:cacheprovider",
        *PARALLEL,
        *ignore,
        *session.posargs,
    )


# The lowest leg must really run on the floors (a stray upgrade would hide a broken floor).
_ASSERT_LOWEST = """
import sys
from importlib.metadata import version
wrong = [f"{pin} (installed {version(pin.split('==')[0])})" for pin in sys.argv[1:]
         if version(pin.split('==')[0]) != pin.split('==')[1]]
if wrong:
    sys.exit("lowest leg: not on the floors: " + ", ".join(wrong))
"""


# A line leg must really run on that line.
_ASSERT_LINE = """
import sys
from importlib.metadata import version
package, major = sys.argv[1:]
if version(package).split(".")[0] != major:
    sys.exit(f"{package} {version(package)} installed, not the {major}.x line")
"""


@nox.session
def docker(session: nox.Session) -> None:
    """Install/start a Docker engine and build test images, then run -m docker."""
    session.install("-e", ".[docker]", *TEST_DEPS, *_pip_for(session))  # docker_setup.py downloads wheels with pip
    setup = ROOT / "scripts" / "docker_setup.py"
    if setup.exists():
        session.run("python", str(setup))
    else:
        session.warn("scripts/docker_setup.py is missing; assuming a Docker engine is running")
    _pytest(session, "-m", "docker", *PARALLEL_DOCKER, *session.posargs)


@nox.session
def ray(session: nox.Session) -> None:
    """RayProvider against a local, loopback-only Ray cluster that the tests start (-m ray).

    In one process: each xdist worker would start a Ray cluster of its own.
    """
    session.install("-e", ".[ray]", *TEST_DEPS)
    _pytest(session, "-m", "ray", *session.posargs)


#: PEP 561 in the shared ``openenv`` namespace: a marker in each of our subpackages, none at the root
PY_TYPED = [
    f"openenv/{pkg}/py.typed" for pkg in ("sync", "aio", "server", "_core", "_async", "_sync", "_blocking", "_cli")
]
#: what the sdist may hold at its top level (pyproject's [tool.hatch.build.targets.sdist] include)
SDIST_TOP = {
    ".ci",
    ".gitignore",  # hatch always adds it
    "bench",
    "docs",
    "examples",
    "scripts",
    "src",
    "tests",
    "CHANGELOG.md",
    "CONTRIBUTING.md",
    "LICENSE",
    "PKG-INFO",
    "README.md",
    "README.pypi.md",
    "mkdocs.yml",
    "noxfile.py",
    "pyproject.toml",
}


def _check_dists(session: nox.Session, wheel: Path, sdist: Path) -> None:
    """List both archives and refuse what must never ship (or must always)."""
    import tarfile
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    with tarfile.open(sdist) as tar:
        members = [m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile() and "/" in m.name]
    session.log(f"{wheel.name}: {len(names)} files\n  " + "\n  ".join(names))
    session.log(f"{sdist.name}: {len(members)} files\n  " + "\n  ".join(sorted(members)))
    problems: list[str] = []
    # we install beside openenv-core / openenv: never ship a file they own
    owned = ("openenv/__init__.py", "openenv/core/", "openenv/cli/", "openenv/auto/", "openenv/cli.py")
    problems += [f"wheel ships {n}, which the released openenv packages own" for n in names if n.startswith(owned)]
    if "openenv/py.typed" in names:
        problems.append("wheel ships openenv/py.typed: that marks openenv-core's modules typed too")
    problems += [f"wheel lacks {marker}" for marker in PY_TYPED if marker not in names]
    if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
        problems.append("wheel lacks the LICENSE file (.dist-info/licenses/LICENSE)")
    if "LICENSE" not in members:
        problems.append("sdist lacks LICENSE")
    tops = {m.split("/")[0] for m in members}
    problems += [f"sdist holds {top!r}, not in its include list" for top in sorted(tops - SDIST_TOP)]
    junk = {".hypothesis", "__pycache__", ".pytest_cache", ".mypy_cache", ".nox", "site", "dist", "docs-shots"}
    problems += [f"sdist holds {m}" for m in members if junk & set(m.split("/")) or m.endswith(".pyc")]
    if problems:
        session.error("distribution check failed:\n  " + "\n  ".join(problems))


@nox.session
def build(session: nox.Session) -> None:
    """Build sdist + wheel (the hook checks the twin), check and list them, install the wheel, import both facades.

    ``twine check --strict`` validates the metadata and the PyPI description
    (README.pypi.md); both archives' file lists are printed.
    """
    uv = session.venv_backend == "uv"  # build's isolated environments and the wheel's venv with uv too
    session.install("build[uv]" if uv else "build", "twine")
    dist = ROOT / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    installer = ["--installer", "uv"] if uv else []
    session.run("python", "-m", "build", *installer, "--outdir", str(dist), str(ROOT))
    wheels = sorted(dist.glob("*.whl"))
    sdists = sorted(dist.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        session.error(f"expected one wheel and one sdist in dist/, found {wheels + sdists}")
    session.run("twine", "check", "--strict", str(wheels[0]), str(sdists[0]))
    _check_dists(session, wheels[0], sdists[0])
    venv = Path(session.create_tmp()) / "wheel-venv"
    shutil.rmtree(venv, ignore_errors=True)
    python = str(venv / ("Scripts" if os.name == "nt" else "bin") / "python")
    if uv:
        session.run(nox.virtualenv.UV, "venv", "-q", "-p", "python", str(venv), external=True)
        session.run(nox.virtualenv.UV, "pip", "install", "-q", "-p", python, str(wheels[0]), external=True)
    else:
        session.run("python", "-m", "venv", str(venv))
        session.run(python, "-m", "pip", "install", "--quiet", str(wheels[0]), external=True)
    smoke = (
        "import sys, openenv.sync, openenv.aio\n"
        "assert openenv.sync.Env is not openenv.aio.Env\n"
        "print('wheel OK:', openenv.sync.__file__)\n"
    )
    # the repo root has no top-level openenv/, so this imports the installed wheel
    session.run(python, "-c", smoke, external=True)
    sync_only = (
        "import sys, openenv.sync\nassert 'asyncio' not in sys.modules, 'import openenv.sync imported asyncio'\n"
    )
    session.run(python, "-c", sync_only, external=True)
    session.run(python, "-m", "openenv", "--help", external=True, silent=True)


@nox.session
def demo(session: nox.Session) -> None:
    """Install the project and run `python -m openenv run` (args after -- are passed on)."""
    session.install("-e", ".")
    session.run("python", "-m", "openenv", "run", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the site with `mkdocs build --strict` into site/, then run every example in the docs.

    `-- serve` previews it instead (`mkdocs serve` on 127.0.0.1:8000);
    `-- --check-site` also runs scripts/check_docs_site.py (links, anchors, screenshots);
    `-- --only-docker-blocks` (or $OPENENV_DOCS_ONLY_DOCKER set, as .ci/run does) runs only the examples marked
    ``docker`` (CI: `nox -s tests` runs the others).
    """
    session.install("-e", ".", *DOCS_DEPS, *TEST_DEPS)
    session.env["NO_MKDOCS_2_WARNING"] = "1"
    if session.posargs[:1] == ["serve"]:
        session.run("mkdocs", "serve", "--dev-addr", "127.0.0.1:8000", *session.posargs[1:])
        return
    session.run("mkdocs", "build", "--strict", "--site-dir", str(ROOT / "site"))
    # each block is a fresh interpreter (as a reader runs it): two workers halve the wait; the blocks
    # that use echo-env:latest run here (only) when it is built (scripts/docker_setup.py tags it)
    session.env["OPENENV_DOCS_DOCKER"] = "1"
    if "--only-docker-blocks" in session.posargs or os.environ.get("OPENENV_DOCS_ONLY_DOCKER"):
        # CI: the other blocks ran in `nox -s tests` (same interpreter, same examples); these need the image
        session.env["OPENENV_DOCS_ONLY_DOCKER"] = "1"
        _pytest(session, "-q", *_xdist(2), "tests/test_docs_examples.py", "-k", "test_example")
    else:
        _pytest(session, "-q", *_xdist(2), "tests/test_docs_examples.py")
    if "--check-site" in session.posargs:
        session.run("python", "scripts/check_docs_site.py", "--site", str(ROOT / "site"))


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks vs raw websockets floors and openenv==0.10.0 (bench/README.md); `-- --only docker`."""
    session.install("-e", ".[docker,server]", "matplotlib")  # server: the ASGI app's contenders (uvicorn)
    # The released client installs the import name `openenv` too: it gets a venv of its own.
    released = Path(session.virtualenv.location).parent / "bench-openenv-0.10.0"
    python = released / ("Scripts" if os.name == "nt" else "bin") / "python"
    marker = released / ".openenv-0.10.0-installed"
    if not marker.exists():
        shutil.rmtree(released, ignore_errors=True)
        session.run_install(sys.executable, "-m", "venv", str(released), external=True)
        session.run_install(str(python), "-m", "pip", "install", "--quiet", "openenv==0.10.0", external=True)
        marker.touch()
    session.run("python", "bench/run.py", "--released-python", str(python), *session.posargs)


@nox.session
def soak(session: nox.Session) -> None:
    """Long soak (tests/soak.py): 32 aio + 16 sync sessions, thousands of steps each; writes bench/SOAK.md.

    Fails on cross-talk between sessions or on threads/fds/RSS outside the stated bounds.
    `-- --steps N` changes the steps per session.
    """
    session.install("-e", ".")
    session.run("python", "-m", "tests.soak", "--steps", "3000", "--markdown", "bench/SOAK.md", *session.posargs)


#: the venvs under .nox/interop-releases and what goes into each: the released packages
#: (tests/interop/conftest.py) and tests/interop/test_openenv_both.py's venvs of openenv-core
#: 0.3.0, into which that test installs our wheel or checkout itself (the same marker file)
INTEROP_VENVS = {
    "v0.10.0": "openenv==0.10.0",
    "v0.3.0": "openenv-core==0.3.0",
    "both-0.3.0": "openenv-core==0.3.0",
    "editable-0.3.0": "openenv-core==0.3.0",
    # tests/interop/test_openenv_providers.py: OpenEnv 0.10's provider objects, our checkout installed beside
    "providers-0.10.0": "openenv==0.10.0",
}


def _build_release_venvs(session: nox.Session, venvs: Path) -> list[tuple[str, Path, subprocess.Popen[bytes], Path]]:
    """Start building the missing venvs of INTEROP_VENVS, all at once; return the builds."""
    base = str(Path(str(session.bin)) / "python")
    building = []
    for name, spec in INTEROP_VENVS.items():
        venv = venvs / name
        if (venv / ".openenv-installed").exists():
            continue
        venv.parent.mkdir(parents=True, exist_ok=True)
        log = venvs / f"{name}.build.log"
        script = f'"{base}" -m venv "{venv}" && "{venv}/bin/python" -m pip install --quiet "{spec}"'
        if session.venv_backend == "uv":  # with pip in it: test_openenv_both.py installs with pip there
            uv = nox.virtualenv.UV
            # from the base interpreter, as `python -m venv` does (not on top of the session's venv)
            real = session.run("python", "-c", "import sys; print(sys._base_executable)", silent=True)
            script = f'"{uv}" venv -q --seed -p "{str(real).strip()}" "{venv}"'
            script += f' && "{uv}" pip install -q -p "{venv}/bin/python" "{spec}"'
        session.log(f"building {venv} ({spec}) in the background; log: {log}")
        with open(log, "wb") as out:
            proc = subprocess.Popen(["sh", "-c", script], stdout=out, stderr=subprocess.STDOUT)
        building.append((spec, venv, proc, log))
    return building


def _wait_release_venvs(session: nox.Session, building: list[tuple[str, Path, subprocess.Popen[bytes], Path]]) -> None:
    """Wait for the builds of _build_release_venvs; mark each finished venv, fail on the first that failed."""
    failed = []
    for spec, venv, proc, log in building:
        if proc.wait() == 0:
            (venv / ".openenv-installed").write_text(spec)
            session.log(f"built {venv} ({spec})")
        else:
            failed.append(f"{spec} into {venv} exited {proc.returncode}:\n{log.read_text()[-3000:]}")
    if failed:
        session.error("building a release venv failed: " + "\n".join(failed))


@nox.session
def interop(session: nox.Session) -> None:
    """Our clients/server against the released openenv 0.10.0 and openenv-core 0.3.0 (-m interop).

    The released packages (both install the import name ``openenv``) go into
    their own venvs under .nox/interop-releases (created once, reused), are run
    only as subprocesses, and never imported here; the matrix is printed at the end.
    """
    venvs = ROOT / ".nox" / "interop-releases"
    # the venvs of INTEROP_VENVS are built while the session's own install runs, all pip processes at
    # once (each mostly waits on downloads and unpacking), instead of one after the other (and the
    # openenv-core venvs of test_openenv_both.py no longer inside its tests, which run one at a time)
    building = _build_release_venvs(session, venvs)
    try:
        # pip: test_openenv_both.py builds our wheel with it
        session.install("-e", ".[docker]", *TEST_DEPS, *_pip_for(session))
    except BaseException:
        for _, _, proc, _ in building:  # ours by PID: nothing left running when the session fails
            proc.kill()
            proc.wait()
        raise
    _wait_release_venvs(session, building)
    session.env["OPENENV_INTEROP_VENVS"] = str(venvs)
    session.env["OPENENV_INTEROP_MATRIX"] = str(venvs / "matrix.json")
    if getattr(nox.virtualenv, "UV", None):  # OpenEnv's UVProvider needs a uv on PATH to be constructed
        session.env["OPENENV_TEST_UV"] = str(nox.virtualenv.UV)
    _pytest(session, "-m", "interop", "-p", "anyio", *PARALLEL_INTEROP, *session.posargs)


# The real TRL GRPOTrainer on CPU (examples/trl_ci.py runs the TRL guide's script, examples/trl_train.py,
# with a tiny model built locally). The versions the guide states as tested. torch 2.13.0: on this project's
# machines a CPU build of it lies in the machine's own wheel directory, which pip's configuration names (uv is
# given it, _pip_wheel_sources); elsewhere PyPI's torch is a CUDA build of several GB (install a CPU build first
# from PyTorch's CPU wheel index to avoid that).
TRL_DEPS = ["torch==2.13.0", "transformers>=5.2,<6", "trl==1.16.0", "jmespath>=1.0"]
# TRL's async trainer's rollout loop talks to its generation server over aiohttp (not a dependency of trl)
TRL_ASYNC_DEPS = ["aiohttp>=3.9"]


def _pip_wheel_sources() -> dict[str, str]:
    """pip's configured wheel directories (find-links) and constraint files, as uv's variables.

    uv reads no pip configuration, and this project's machines name their CPU build of torch only there
    (``find-links``); without it uv would take PyPI's CUDA build. Only local folders and files that exist
    and http(s) locations are passed on.
    """
    try:
        listed = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    links: list[str] = []
    constraints: list[str] = []
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        for item in value.strip().strip("'\"").split():
            local = item.removeprefix("file://")
            usable = item.startswith(("http://", "https://")) or os.path.exists(local)
            if key.endswith(".find-links") and usable and item not in links:
                links.append(item)
            elif key.endswith(".constraint") and os.path.isfile(local) and local not in constraints:
                constraints.append(local)
    found = {"UV_FIND_LINKS": ",".join(links)} if links else {}
    return found | ({"UV_CONSTRAINT": " ".join(constraints)} if constraints else {})


@nox.session
def trl(session: nox.Session) -> None:
    """TRL's real GRPOTrainer (2 steps) and its async trainer's rollout loop on our environments (CPU, no model hub)."""
    if session.venv_backend == "uv":  # seconds where pip took a minute of CPU (torch, transformers, ...)
        session.env.update(_pip_wheel_sources())
    session.install("-e", ".", *TRL_DEPS, *TRL_ASYNC_DEPS)
    env = {"HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    _compile_tree(session)  # the examples start environment servers and TRL's rollout process
    session.run("python", "examples/trl_ci.py", env=env)
    # AsyncGRPOTrainer's rollout worker: the classes pickled into its spawned process, rollouts in flight on its loop
    session.run("python", "examples/trl_async_ci.py", env=env)

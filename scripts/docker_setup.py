#!/usr/bin/env python3
"""Prepare a Docker engine, the test images and a loopback registry.

Stdlib only: this runs with the system ``python3`` before anything else is
installed.  Every step is skipped when its result is already there, and every
external command has a time bound.

Steps:

a. make a Docker engine answer (install ``docker.io`` and start ``dockerd`` in
   the background when needed; its log goes to ``/tmp/openenv-dockerd.log``);
b. build ``openenv-test/python-base:latest`` offline from Debian bookworm with
   ``mmdebstrap`` (python3 + a venv at /opt/venv) and ``docker import`` it;
c. build wheels of this project and its runtime dependencies on the host (for
   the image's CPython 3.11) and the test images from ``tests/docker/``:
   ``echo``, ``slow``, ``exits``, ``never`` (and ``pullprobe`` for pull tests);
c'. the released ``openenv-core`` 0.3.0 image (``openenv-test/openenv-core:0.3.0``,
   its wheels downloaded once into a reused cache, ``$OPENENV_DOCKER_WHEEL_CACHE``)
   and, FROM it, the environments of ``tests/openenv_envs/`` in OpenEnv's layout:
   ``openenv-test/mcp-guess:latest`` and ``openenv-test/duel:latest`` (skip them
   with ``--no-openenv-envs``);
d. serve Debian's ``docker-registry`` on 127.0.0.1:5000 and push
   ``127.0.0.1:5000/openenv-echo-env:latest`` (what ``from_env("openenv/echo_env")``
   maps to with the registry host overridden) and
   ``127.0.0.1:5000/openenv-pull-probe:latest``, then drop their local tags so
   pulls are real.

The last line printed on stdout is a JSON object of what is ready.

The echo image is tagged ``echo-env:latest`` too, the name the documentation's examples
use; ``--echo-only`` builds just that one (the base image, then echo), as the docs say.

Usage: ``python3 scripts/docker_setup.py [--no-registry] [--no-openenv-envs] [--echo-only] [--force-rebuild]``
"""

from __future__ import annotations

import argparse
import email.parser
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCKER_DIR = ROOT / "tests" / "docker"
OPENENV_ENVS_DIR = ROOT / "tests" / "openenv_envs"
WORK = Path(os.environ.get("OPENENV_DOCKER_WORK", "/tmp/openenv-docker-build"))
DOCKERD_LOG = Path("/tmp/openenv-dockerd.log")
REGISTRY_DIR = Path("/tmp/openenv-registry")
REGISTRY_ADDR = "127.0.0.1:5000"
LOCK_FILE = Path("/tmp/openenv-docker-setup.lock")
#: wheels of the released openenv-core for the images; kept between runs (and CI jobs: cache it)
WHEEL_CACHE = Path(os.environ.get("OPENENV_DOCKER_WHEEL_CACHE", WORK / "wheel-cache"))

PREFIX = "openenv-test"
BASE_IMAGE = f"{PREFIX}/python-base:latest"
ECHO_IMAGE = f"{PREFIX}/echo:latest"
SLOW_IMAGE = f"{PREFIX}/slow:latest"
EXITS_IMAGE = f"{PREFIX}/exits:latest"
NEVER_IMAGE = f"{PREFIX}/never:latest"
#: the name the documentation's examples use for the echo image (tagged on ECHO_IMAGE)
DOCS_ECHO_IMAGE = "echo-env:latest"
PROBE_IMAGE = f"{PREFIX}/pullprobe:latest"
CORE_REQUIREMENT = "openenv-core==0.3.0"
CORE_IMAGE = f"{PREFIX}/openenv-core:0.3.0"
#: image -> folder of tests/openenv_envs (OpenEnv's layout; built from server/Dockerfile, FROM CORE_IMAGE)
OPENENV_ENV_IMAGES = {
    f"{PREFIX}/mcp-guess:latest": "mcp_guess",
    f"{PREFIX}/duel:latest": "duel",
}
#: local image -> repository:tag in the loopback registry
REGISTRY_PUSHES = {
    ECHO_IMAGE: "openenv-echo-env:latest",
    PROBE_IMAGE: "openenv-pull-probe:latest",
}
TEST_LABEL = "org.openenv.test=1"
HASH_LABEL = "org.openenv.src-hash"
IMAGE_PYTHON = "3.11"  # Debian bookworm's python3
VENV_PATH = "/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

_T0 = time.monotonic()
_apt_updated = False


class SetupError(RuntimeError):
    pass


# --------------------------------------------------------------------------- helpers


def log(msg: str) -> None:
    print(f"[docker_setup +{time.monotonic() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def run(
    cmd: Sequence[str],
    *,
    timeout: float,
    check: bool = True,
    quiet: bool = False,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess:
    """Run ``cmd`` bounded by ``timeout``; capture output; raise SetupError on failure."""
    if not quiet:
        log("$ " + " ".join(cmd))
    try:
        proc = subprocess.run(
            list(cmd),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=cwd,
        )
    except FileNotFoundError as exc:
        if check:
            raise SetupError(f"command not found: {cmd[0]}") from exc
        return subprocess.CompletedProcess(list(cmd), 127, "", str(exc))
    except subprocess.TimeoutExpired as exc:
        raise SetupError(f"timed out after {timeout:.0f}s: {' '.join(cmd)}") from exc
    if check and proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise SetupError(f"exit {proc.returncode}: {' '.join(cmd)}\n{tail}")
    return proc


def apt_install(*packages: str) -> None:
    global _apt_updated
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if not _apt_updated:
        run(["apt-get", "update", "-q"], timeout=300, env=env)
        _apt_updated = True
    run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
        timeout=900,
        env=env,
    )


def docker_ok() -> bool:
    try:
        proc = run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            timeout=10,
            check=False,
            quiet=True,
        )
    except SetupError:
        return False
    return proc.returncode == 0 and bool(proc.stdout.strip())


def image_labels(image: str) -> dict[str, str] | None:
    """The image's labels, or None when the image is absent."""
    proc = run(
        ["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", image],
        timeout=30,
        check=False,
        quiet=True,
    )
    if proc.returncode != 0:
        return None
    try:
        return json.loads(proc.stdout.strip() or "null") or {}
    except ValueError:
        return {}


def image_id(image: str) -> str | None:
    proc = run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", image],
        timeout=30,
        check=False,
        quiet=True,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def docker_build(tag: str, context: Path, labels: dict[str, str], dockerfile: str | None = None) -> None:
    cmd = ["docker", "build", "--rm", "--force-rm", "-t", tag]
    if dockerfile is not None:
        cmd += ["-f", str(context / dockerfile)]
    for key, value in labels.items():
        cmd += ["--label", f"{key}={value}"]
    cmd.append(str(context))
    env = dict(os.environ, DOCKER_BUILDKIT="0")
    t = time.monotonic()
    run(cmd, timeout=900, env=env)
    log(f"built {tag} in {time.monotonic() - t:.1f}s")


# --------------------------------------------------------------------------- (a) engine


def ensure_engine() -> None:
    if docker_ok():
        log("engine: docker info answers; nothing to do")
        return
    if shutil.which("dockerd") is None:
        log("engine: dockerd missing; installing docker.io")
        apt_install("docker.io")
    if shutil.which("docker") is None:
        raise SetupError("the docker CLI is missing after installing docker.io")
    log(f"engine: starting dockerd in the background (log: {DOCKERD_LOG})")
    logf = open(DOCKERD_LOG, "ab")
    subprocess.Popen(
        ["dockerd"],
        stdin=subprocess.DEVNULL,
        stdout=logf,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        close_fds=True,
    )
    logf.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if docker_ok():
            log("engine: docker info answers")
            return
        time.sleep(0.25)
    tail = DOCKERD_LOG.read_text(errors="replace").splitlines()[-20:]
    raise SetupError("dockerd did not answer within 60s; last log lines:\n" + "\n".join(tail))


# --------------------------------------------------------------------------- (b) base image


def ensure_base_image(force: bool) -> None:
    if not force and image_labels(BASE_IMAGE) is not None:
        log(f"base: {BASE_IMAGE} present; skipping")
        return
    if shutil.which("mmdebstrap") is None:
        log("base: installing mmdebstrap")
        apt_install("mmdebstrap")
    WORK.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=WORK, prefix="rootfs-") as tmp:
        tarball = Path(tmp) / "rootfs.tar"
        cmd = [
            "mmdebstrap",
            "--variant=minbase",
            "--mode=root",
            "--include=python3,python3-venv,ca-certificates",
            # keep it small: no docs, man pages or translations
            "--dpkgopt=path-exclude=/usr/share/man/*",
            "--dpkgopt=path-exclude=/usr/share/locale/*",
            "--dpkgopt=path-exclude=/usr/share/doc/*",
            "--dpkgopt=path-include=/usr/share/doc/*/copyright",
            '--aptopt=APT::Install-Recommends "false"',
            '--customize-hook=chroot "$1" python3 -m venv /opt/venv',
            '--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*',
            "bookworm",
            str(tarball),
        ]
        t = time.monotonic()
        run(cmd, timeout=900)
        log(f"base: rootfs built in {time.monotonic() - t:.1f}s ({tarball.stat().st_size / 1e6:.0f} MB)")
        run(
            [
                "docker",
                "import",
                "--change",
                f"ENV PATH={VENV_PATH}",
                "--change",
                "ENV LANG=C.UTF-8",
                "--change",
                "ENV PYTHONUNBUFFERED=1",
                "--change",
                "ENV PIP_DISABLE_PIP_VERSION_CHECK=1",
                "--change",
                "WORKDIR /app",
                "--change",
                f"LABEL {TEST_LABEL}",
                "--change",
                'CMD ["python"]',
                str(tarball),
                BASE_IMAGE,
            ],
            timeout=300,
        )
    log(f"base: imported {BASE_IMAGE}")


# --------------------------------------------------------------------------- (c) wheels + images


def _hash_files(h: hashlib._Hash, files: Sequence[Path]) -> None:
    for path in files:
        if "__pycache__" in path.parts or not path.is_file():
            continue
        h.update(str(path.relative_to(ROOT)).encode() + b"\0")
        h.update(path.read_bytes() + b"\0")


def folder_hash(name: str, *, with_sources: bool = False) -> str:
    """A hash of ``tests/docker/<name>`` (plus the project's sources and pyproject)."""
    h = hashlib.sha256()
    if with_sources:
        _hash_files(h, sorted((ROOT / "src" / "openenv").rglob("*.py")) + [ROOT / "pyproject.toml"])
    _hash_files(h, sorted(p for p in (DOCKER_DIR / name).rglob("*") if p.is_file()))
    return h.hexdigest()[:16]


def _pip_platforms() -> list[str]:
    machine = platform.machine()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine)
    # bookworm has glibc 2.36
    return [f"manylinux_2_{v}_{arch}" for v in (36, 35, 34, 31, 28, 24, 17)] + [f"manylinux2014_{arch}"]


def _runtime_requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(zf.read(name).decode())
    reqs = []
    for req in meta.get_all("Requires-Dist") or []:
        if ";" in req and "extra" in req.split(";", 1)[1]:
            continue
        reqs.append(req.split(";", 1)[0].strip())
    return reqs


def build_wheels(dest: Path) -> None:
    """Our wheel (pure Python) in ``dest/ours``; every runtime dependency in ``dest/deps``.

    The dependencies are downloaded for the image's CPython (3.11, manylinux)
    whatever the host's Python is, and kept between runs: ``deps`` is reused
    while the requirements are the same, so the image's dependency layer stays
    cached and a source change rebuilds only the layer of our own wheel.
    """
    ours_dir, deps_dir = dest / "ours", dest / "deps"
    if ours_dir.exists():
        shutil.rmtree(ours_dir)
    ours_dir.mkdir(parents=True)
    pip = [sys.executable, "-m", "pip"]
    if run([*pip, "--version"], timeout=60, check=False, quiet=True).returncode != 0:
        log("wheels: pip missing for this python3; installing python3-pip")
        apt_install("python3-pip")
    t = time.monotonic()
    # The test image carries the working tree as it is: the release build hook
    # (scripts/hatch_build.py refuses a stale sync twin) is not this script's gate.
    env = dict(os.environ, HATCH_BUILD_NO_HOOKS="true")
    run([*pip, "wheel", "--no-deps", "--wheel-dir", str(ours_dir), str(ROOT)], timeout=600, env=env)
    ours = sorted(ours_dir.glob("openenv_twin-*.whl"))
    if not ours:
        raise SetupError(f"pip wheel produced no openenv_twin wheel in {ours_dir}")
    log(f"wheels: built {ours[-1].name} in {time.monotonic() - t:.1f}s")

    reqs = _runtime_requirements(ours[-1])
    requirements = "\n".join(sorted(reqs)) + "\n"
    stamp = hashlib.sha256((requirements + " ".join(_pip_platforms())).encode()).hexdigest()[:16]
    marker = deps_dir / ".complete"
    if marker.is_file() and marker.read_text().strip() == stamp:
        log(f"wheels: dependencies unchanged ({', '.join(reqs)}); reusing {deps_dir}")
        return
    if deps_dir.exists():
        shutil.rmtree(deps_dir)
    deps_dir.mkdir(parents=True)
    t = time.monotonic()
    cmd = [*pip, "download", "--only-binary=:all:", "--dest", str(deps_dir)]
    cmd += ["--python-version", IMAGE_PYTHON, "--implementation", "cp"]
    cmd += ["--abi", "cp311", "--abi", "abi3", "--abi", "none"]
    for plat in [*_pip_platforms(), "any"]:
        cmd += ["--platform", plat]
    run([*cmd, *reqs], timeout=600)
    (deps_dir / "requirements.txt").write_text(requirements)
    marker.write_text(stamp + "\n")
    n = len(list(deps_dir.glob("*.whl")))
    log(f"wheels: {n} dependency wheels in {time.monotonic() - t:.1f}s ({', '.join(reqs)})")


def stage_context(name: str, wheels: Path | None) -> Path:
    """Copy ``tests/docker/<name>`` to a scratch build context (plus wheels)."""
    src = DOCKER_DIR / name
    if not (src / "Dockerfile").is_file():
        raise SetupError(f"missing {src / 'Dockerfile'}")
    ctx = WORK / "ctx" / name
    if ctx.exists():
        shutil.rmtree(ctx)
    shutil.copytree(src, ctx, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if wheels is not None:
        shutil.copytree(wheels, ctx / "wheels")
    return ctx


def _current(image: str, want_hash: str, force: bool) -> bool:
    labels = image_labels(image)
    return not force and labels is not None and labels.get(HASH_LABEL) == want_hash


def ensure_images(force: bool, with_envs: bool = True, echo_only: bool = False) -> list[str]:
    """Build echo (our server), slow (FROM echo), exits and never; skip the current ones.

    The echo image is also tagged ``echo-env:latest``, the name the docs' examples use;
    ``echo_only`` builds that one alone (``--echo-only``: what a reader of the docs needs).

    With ``with_envs``, also the openenv-core image and the environments of
    ``tests/openenv_envs`` (see :func:`ensure_openenv_images`).

    Each image carries ``org.openenv.src-hash``: a hash of its build folder
    (plus, for echo and slow, the project's sources and pyproject), so an
    image is rebuilt exactly when what it is made of changed.
    """
    ready: list[str] = []
    echo_hash = folder_hash("echo", with_sources=True)
    if _current(ECHO_IMAGE, echo_hash, force):
        log(f"images: {ECHO_IMAGE} is current (src-hash {echo_hash}); skipping")
        rebuilt = False
    else:
        why = "forced" if force else ("absent" if image_labels(ECHO_IMAGE) is None else "sources changed")
        log(f"images: building {ECHO_IMAGE} ({why}; src-hash {echo_hash})")
        wheels = WORK / "wheels"
        build_wheels(wheels)
        docker_build(ECHO_IMAGE, stage_context("echo", wheels), {HASH_LABEL: echo_hash})
        rebuilt = True
    ready.append(ECHO_IMAGE)
    run(["docker", "tag", ECHO_IMAGE, DOCS_ECHO_IMAGE], timeout=60)
    ready.append(DOCS_ECHO_IMAGE)
    if echo_only:
        return ready

    # slow is FROM echo, so it follows echo's hash too
    slow_hash = hashlib.sha256((echo_hash + folder_hash("slow")).encode()).hexdigest()[:16]
    if _current(SLOW_IMAGE, slow_hash, force):
        log(f"images: {SLOW_IMAGE} is current; skipping")
    else:
        docker_build(SLOW_IMAGE, stage_context("slow", None), {HASH_LABEL: slow_hash})
        rebuilt = True
    ready.append(SLOW_IMAGE)

    for image, name in ((EXITS_IMAGE, "exits"), (NEVER_IMAGE, "never")):
        want = folder_hash(name)
        if _current(image, want, force):
            log(f"images: {image} is current; skipping")
        else:
            docker_build(image, stage_context(name, None), {HASH_LABEL: want})
            rebuilt = True
        ready.append(image)

    if with_envs:
        env_images, env_rebuilt = ensure_openenv_images(force)
        ready += env_images
        rebuilt = rebuilt or env_rebuilt

    if rebuilt:
        # the images replaced above are now untagged: drop them (only ours, by label)
        run(
            ["docker", "image", "prune", "-f", "--filter", f"label={TEST_LABEL}"],
            timeout=120,
            check=False,
        )
    return ready


# --------------------------------------------------------------------------- (c') openenv-core + envs


def _link_tree(src: Path, dest: Path) -> None:
    """Copy ``src`` to ``dest`` with hard links where possible (the wheel cache is large)."""

    def link(a: str, b: str) -> None:
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    shutil.copytree(src, dest, copy_function=link)


def core_wheels_stamp() -> str:
    return hashlib.sha256((CORE_REQUIREMENT + " " + " ".join(_pip_platforms())).encode()).hexdigest()[:16]


def download_core_wheels() -> Path:
    """``openenv-core`` 0.3.0 and all its dependencies as cp311 manylinux wheels, in the cache.

    Downloaded once (a few hundred MB: gradio and friends) and reused while the
    requirement and the platforms are the same; a marker file says the download finished.
    """
    dest = WHEEL_CACHE / CORE_REQUIREMENT.replace("==", "-")
    marker = dest / ".complete"
    stamp = core_wheels_stamp()
    if marker.is_file() and marker.read_text().strip() == stamp:
        log(f"wheels: {CORE_REQUIREMENT} cached in {dest}; reusing")
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    t = time.monotonic()
    cmd = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--dest", str(dest)]
    cmd += ["--python-version", IMAGE_PYTHON, "--implementation", "cp"]
    cmd += ["--abi", "cp311", "--abi", "abi3", "--abi", "none"]
    for plat in [*_pip_platforms(), "any"]:
        cmd += ["--platform", plat]
    run([*cmd, CORE_REQUIREMENT], timeout=1200)
    marker.write_text(stamp + "\n")
    size = sum(p.stat().st_size for p in dest.glob("*.whl")) / 1e6
    n = len(list(dest.glob("*.whl")))
    log(f"wheels: {n} wheels for {CORE_REQUIREMENT} ({size:.0f} MB) in {time.monotonic() - t:.1f}s")
    return dest


def env_folder_hash(name: str) -> str:
    h = hashlib.sha256()
    _hash_files(h, sorted(p for p in (OPENENV_ENVS_DIR / name).rglob("*") if p.is_file()))
    return h.hexdigest()[:16]


def ensure_openenv_images(force: bool) -> tuple[list[str], bool]:
    """The openenv-core image, then one image per environment of ``tests/openenv_envs``.

    The core image's hash covers the requirement, the platforms and its folder;
    each environment image's hash covers the core image's hash and the env folder,
    so editing an environment rebuilds only its own (seconds-long) image.
    """
    ready: list[str] = []
    rebuilt = False
    core_hash = hashlib.sha256((core_wheels_stamp() + folder_hash("openenv-core")).encode()).hexdigest()[:16]
    if _current(CORE_IMAGE, core_hash, force):
        log(f"images: {CORE_IMAGE} is current; skipping")
    else:
        wheels = download_core_wheels()
        ctx = stage_context("openenv-core", None)
        _link_tree(wheels, ctx / "wheels")
        docker_build(CORE_IMAGE, ctx, {HASH_LABEL: core_hash})
        shutil.rmtree(ctx, ignore_errors=True)
        rebuilt = True
    ready.append(CORE_IMAGE)
    for image, name in OPENENV_ENV_IMAGES.items():
        want = hashlib.sha256((core_hash + env_folder_hash(name)).encode()).hexdigest()[:16]
        if _current(image, want, force):
            log(f"images: {image} is current; skipping")
        else:
            ctx = WORK / "ctx" / f"env-{name}"
            if ctx.exists():
                shutil.rmtree(ctx)
            shutil.copytree(OPENENV_ENVS_DIR / name, ctx, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            docker_build(image, ctx, {HASH_LABEL: want}, dockerfile="server/Dockerfile")
            rebuilt = True
        ready.append(image)
    return ready, rebuilt


# --------------------------------------------------------------------------- (d) registry


REGISTRY_CONFIG = """\
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {root}
  delete:
    enabled: true
http:
  addr: {addr}
"""


def _http(url: str, *, method: str = "GET", headers: dict[str, str] | None = None, timeout: float = 5):
    req = urllib.request.Request(url, method=method, headers=headers or {})
    # loopback only: never go through a proxy
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return opener.open(req, timeout=timeout)


def registry_ok() -> bool:
    try:
        with _http(f"http://{REGISTRY_ADDR}/v2/", timeout=2) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError):
        return False


def registry_config_digest(repo_tag: str) -> str | None:
    """The image config digest (= local image id) of ``repo:tag`` in the registry."""
    repo, tag = repo_tag.rsplit(":", 1)
    try:
        with _http(
            f"http://{REGISTRY_ADDR}/v2/{repo}/manifests/{tag}",
            headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
        ) as resp:
            manifest = json.loads(resp.read())
    except (OSError, urllib.error.URLError, ValueError):
        return None
    return (manifest.get("config") or {}).get("digest")


def _push(local: str, target: str) -> None:
    t = time.monotonic()
    run(["docker", "tag", local, target], timeout=30)
    try:
        run(["docker", "push", target], timeout=600)
    finally:
        run(["docker", "rmi", target], timeout=60, check=False, quiet=True)
    log(f"registry: pushed {target} in {time.monotonic() - t:.1f}s")


def ensure_registry(force: bool) -> list[str]:
    if registry_ok():
        log(f"registry: {REGISTRY_ADDR} answers")
    else:
        binary = shutil.which("docker-registry") or "/usr/bin/docker-registry"
        if not Path(binary).exists():
            log("registry: installing docker-registry")
            apt_install("docker-registry")
        (REGISTRY_DIR / "data").mkdir(parents=True, exist_ok=True)
        config = REGISTRY_DIR / "config.yml"
        config.write_text(REGISTRY_CONFIG.format(root=REGISTRY_DIR / "data", addr=REGISTRY_ADDR))
        logpath = REGISTRY_DIR / "registry.log"
        log(f"registry: starting {binary} serve {config} (log: {logpath})")
        with open(logpath, "ab") as logf:
            subprocess.Popen(
                [binary, "serve", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        deadline = time.monotonic() + 20
        while not registry_ok():
            if time.monotonic() > deadline:
                tail = logpath.read_text(errors="replace").splitlines()[-20:]
                raise SetupError("docker-registry did not answer within 20s:\n" + "\n".join(tail))
            time.sleep(0.1)
        log(f"registry: {REGISTRY_ADDR} answers")

    pushed = []
    for local, remote in REGISTRY_PUSHES.items():
        target = f"{REGISTRY_ADDR}/{remote}"
        remote_digest = registry_config_digest(remote)
        if local == PROBE_IMAGE:
            # the probe exists only to be pulled: any pushed version will do
            if remote_digest is None or force:
                if force or image_labels(PROBE_IMAGE) is None:
                    docker_build(PROBE_IMAGE, stage_context("pullprobe", None), {})
                _push(local, target)
            else:
                log(f"registry: {target} present; skipping push")
            # drop the local copy so the probe's own layer must come from the registry
            run(["docker", "rmi", PROBE_IMAGE], timeout=60, check=False, quiet=True)
        else:
            local_id = image_id(local)
            if local_id is None:
                raise SetupError(f"registry: {local} is missing locally; cannot push")
            if remote_digest == local_id:
                log(f"registry: {target} is current; skipping push")
            else:
                _push(local, target)
        # a tag left by an earlier pull would make the next pull a no-op
        if image_id(target) is not None:
            run(["docker", "rmi", target], timeout=60, check=False)
        pushed.append(target)
    return pushed


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-registry", action="store_true", help="skip the loopback registry")
    parser.add_argument(
        "--no-openenv-envs",
        action="store_true",
        help="skip the openenv-core 0.3.0 image and the tests/openenv_envs images",
    )
    parser.add_argument("--force-rebuild", action="store_true", help="rebuild every image")
    parser.add_argument(
        "--echo-only",
        action="store_true",
        help="build only the echo image the docs use (echo-env:latest); implies --no-registry --no-openenv-envs",
    )
    args = parser.parse_args(argv)

    result: dict[str, object] = {
        "engine": False,
        "images": [],
        "registry": None,
        "registry_images": [],
    }
    LOCK_FILE.touch(exist_ok=True)
    with open(LOCK_FILE, "r+") as lock:
        deadline = time.monotonic() + 1800
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    log("another docker_setup.py holds the lock for 30 min; giving up")
                    return 2
                time.sleep(1)
        try:
            ensure_engine()
            result["engine"] = True
            ensure_base_image(args.force_rebuild)
            with_envs = not (args.no_openenv_envs or args.echo_only)
            result["images"] = [BASE_IMAGE, *ensure_images(args.force_rebuild, with_envs, args.echo_only)]
            if not (args.no_registry or args.echo_only):
                result["registry_images"] = ensure_registry(args.force_rebuild)
                result["registry"] = REGISTRY_ADDR
        except SetupError as exc:
            log(f"FAILED: {exc}")
            result["error"] = str(exc).splitlines()[0]
            result["seconds"] = round(time.monotonic() - _T0, 1)
            print(json.dumps(result), flush=True)
            return 1
    result["seconds"] = round(time.monotonic() - _T0, 1)
    log(f"done in {result['seconds']}s")
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The loop-free docker-py steps of ``openenv._blocking.docker``, against a real engine.

Needs the images built by ``python3 scripts/docker_setup.py`` (and, for the
pull tests, its loopback registry on 127.0.0.1:5000, overridable with
``OPENENV_TEST_REGISTRY``).  Without an engine the module is skipped, except
under ``CI=true`` where it fails instead.

Every container these tests start carries the label ``org.openenv.test.suite``
and is removed by the test itself; the module ends by asserting that no
``org.openenv.managed=1`` container owned by this process is left.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from openenv._blocking import docker as bd
from openenv._blocking import procfs
from openenv._core.containers import (
    LABEL_MANAGED,
    LABEL_PID,
    LABEL_SESSION,
    container_labels,
    new_container_name,
    new_session_id,
)
from openenv._core.errors import (
    ContainerExited,
    DockerUnavailable,
    ImageNotFound,
    OpenEnvError,
    ProviderError,
)
from openenv._core.lifetimes import identity_from_labels, identity_labels

pytestmark = pytest.mark.docker

NEVER = "openenv-test/never:latest"
EXITS = "openenv-test/exits:latest"
ECHO = "openenv-test/echo:latest"
MISSING = "openenv-test/does-not-exist:latest"
REGISTRY = os.environ.get("OPENENV_TEST_REGISTRY", "127.0.0.1:5000")
SUITE_LABEL = "org.openenv.test.suite"
FATAL_LINE = "fatal: cannot load environment (test image)"
SETUP_HINT = "run `python3 scripts/docker_setup.py` first"


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _unavailable(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"{reason} (CI=true: the Docker suite must run; {SETUP_HINT})", pytrace=False)
    pytest.skip(f"{reason}; {SETUP_HINT}")


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    try:
        docker_client = bd.connect_client(timeout=60)
    except DockerUnavailable as exc:
        _unavailable(f"no Docker engine answers: {exc}")
    missing = [image for image in (NEVER, EXITS) if not bd.image_present(docker_client, image)]
    if missing:
        docker_client.close()
        _unavailable(f"test images missing: {', '.join(missing)}")
    yield docker_client
    try:
        left = bd.list_managed(docker_client, all_processes=False)
        for summary in left:  # clean up anyway, then fail
            bd.remove_container(docker_client, summary.id)
        assert not left, f"managed containers left behind: {[s.name for s in left]}"
    finally:
        docker_client.close()


@pytest.fixture
def session() -> str:
    return new_session_id()


@pytest.fixture
def cleanup(client: Any) -> Iterator[list[str]]:
    """Names/ids appended here are force-removed after the test, whatever happened."""
    refs: list[str] = []
    yield refs
    for ref in refs:
        bd.remove_container(client, ref)


def _labels(session: str) -> dict[str, str]:
    return container_labels(session, extra={SUITE_LABEL: "test_blocking_docker"})


def _wait_http_status(url: str, timeout: float = 20.0) -> int:
    """Poll ``url`` until it answers an HTTP status (any), bounded."""
    deadline = time.monotonic() + timeout
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    while True:
        try:
            with opener.open(url, timeout=2) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _wait_stopped(client: Any, ref: str, timeout: float = 20.0) -> tuple[str, int | None]:
    deadline = time.monotonic() + timeout
    while True:
        status, code = bd.container_status(client, ref)
        if status not in ("created", "running", "restarting"):
            return status, code
        assert time.monotonic() < deadline, f"{ref} still {status} after {timeout}s"
        time.sleep(0.05)


# --------------------------------------------------------------------------- client


def test_connect_client_unreachable_says_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/openenv-test.sock")
    with pytest.raises(DockerUnavailable) as info:
        bd.connect_client(timeout=5)
    message = str(info.value)
    assert "start the Docker daemon (dockerd) or set DOCKER_HOST" in message
    assert "/nonexistent/openenv-test.sock" in message
    assert isinstance(info.value, ProviderError) and isinstance(info.value, OpenEnvError)


def test_image_present(client: Any) -> None:
    assert bd.image_present(client, NEVER)
    assert not bd.image_present(client, MISSING)


# --------------------------------------------------------------------------- start / port / status


def test_start_publishes_on_loopback_and_reads_the_port(client: Any, session: str, cleanup: list[str]) -> None:
    name = new_container_name(NEVER)
    cleanup.append(name)
    info = bd.start_container(client, NEVER, name=name, labels=_labels(session), environment={"FOO": "bar"})

    assert info.name == name and info.host == "127.0.0.1" and 1024 <= info.host_port < 65536
    assert info.base_url == f"http://127.0.0.1:{info.host_port}"

    attrs = client.api.inspect_container(info.id)
    assert attrs["Name"] == "/" + name
    assert attrs["HostConfig"]["PortBindings"]["8000/tcp"] == [{"HostIp": "127.0.0.1", "HostPort": ""}]
    assert attrs["NetworkSettings"]["Ports"]["8000/tcp"] == [{"HostIp": "127.0.0.1", "HostPort": str(info.host_port)}]
    labels = attrs["Config"]["Labels"]
    assert labels[LABEL_MANAGED] == "1"
    assert labels[LABEL_SESSION] == session
    assert labels[LABEL_PID] == str(os.getpid())
    assert labels["org.openenv.test"] == "1"  # inherited from the image
    assert "FOO=bar" in attrs["Config"]["Env"]

    # the published port reaches the server in the container (never: 503 forever)
    assert _wait_http_status(f"{info.base_url}/health") == 503
    assert bd.container_status(client, info.id) == ("running", None)
    assert bd.container_status(client, name) == ("running", None)


def test_run_options_are_merged_under_ours(client: Any, session: str, cleanup: list[str]) -> None:
    name = new_container_name(NEVER)
    cleanup.append(name)
    info = bd.start_container(
        client,
        NEVER,
        name=name,
        labels=_labels(session),
        environment={"A": "from-argument"},
        run_options={
            "labels": {"extra.label": "x", LABEL_SESSION: "spoofed"},
            "environment": {"A": "from-options", "B": "b"},
            "mem_limit": "256m",
        },
    )
    attrs = client.api.inspect_container(info.id)
    assert attrs["Config"]["Labels"]["extra.label"] == "x"
    assert attrs["Config"]["Labels"][LABEL_SESSION] == session
    assert {"A=from-argument", "B=b"} <= set(attrs["Config"]["Env"])
    assert attrs["HostConfig"]["Memory"] == 256 * 1024 * 1024
    with pytest.raises(ValueError):
        bd.start_container(client, NEVER, name=name + "-x", labels=_labels(session), run_options={"remove": True})


def test_name_taken_is_an_error_and_leaves_the_other_container(client: Any, session: str, cleanup: list[str]) -> None:
    name = new_container_name(NEVER)
    cleanup.append(name)
    first = bd.start_container(client, NEVER, name=name, labels=_labels(session))
    with pytest.raises(ProviderError, match=name):
        bd.start_container(client, NEVER, name=name, labels=_labels(new_session_id()))
    assert bd.container_status(client, first.id) == ("running", None)


# --------------------------------------------------------------------------- a container that dies


def test_exits_image_status_and_logs_tail(client: Any, session: str, cleanup: list[str]) -> None:
    """Running first, then exited: status, exit code and the last log lines."""
    name = new_container_name(EXITS)
    cleanup.append(name)
    info = bd.start_container(
        client,
        EXITS,
        name=name,
        labels=_labels(session),
        environment={"OPENENV_TEST_EXIT_DELAY": "1.5"},
    )
    assert bd.container_status(client, info.id) == ("running", None)
    assert _wait_stopped(client, info.id) == ("exited", 3)

    logs = bd.container_logs_tail(client, info.id, lines=20)
    assert "exits: starting (test image)" in logs
    assert FATAL_LINE in logs
    assert bd.container_logs_tail(client, info.id, lines=1).strip() == FATAL_LINE


def test_exits_at_once_reports_code_and_logs(client: Any, session: str, cleanup: list[str]) -> None:
    """Either start_container sees it dead (ContainerExited, removed) or it dies just after."""
    name = new_container_name(EXITS)
    cleanup.append(name)
    try:
        info = bd.start_container(client, EXITS, name=name, labels=_labels(session))
    except ContainerExited as exc:
        assert exc.exit_code == 3
        assert FATAL_LINE in exc.logs and FATAL_LINE in str(exc) and "exit code 3" in str(exc)
        assert bd.container_status(client, name) == (
            bd.STATUS_MISSING,
            None,
        )  # removed before raising
        return
    assert _wait_stopped(client, info.id) == ("exited", 3)
    assert FATAL_LINE in bd.container_logs_tail(client, info.id)


def test_container_exited_message() -> None:
    exc = ContainerExited("openenv-x-1-abc", 3, "line one\n" + FATAL_LINE + "\n")
    assert exc.exit_code == 3 and exc.container == "openenv-x-1-abc"
    assert "exit code 3" in str(exc) and FATAL_LINE in str(exc)
    assert "printed nothing" in str(ContainerExited("c", None, ""))


# --------------------------------------------------------------------------- missing image


def test_missing_image_is_image_not_found_and_leaves_nothing(client: Any, session: str) -> None:
    name = new_container_name(MISSING)
    with pytest.raises(ImageNotFound) as info:
        bd.start_container(client, MISSING, name=name, labels=_labels(session))
    assert info.value.image == MISSING
    assert MISSING in str(info.value) and "pull" in str(info.value)
    assert bd.container_status(client, name) == (bd.STATUS_MISSING, None)
    assert bd.list_managed(client, session_id=session) == []


def test_a_ctrl_c_before_the_engine_has_created_the_container_still_leaves_nothing(
    client: Any, session: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C while ``docker create`` is in flight: the engine may create the container after our first look.

    (A loaded CI engine did: one look found nothing, and the container appeared a moment later.) The create
    here reaches the engine 0.5 s after the interrupt, as a slow engine's would.
    """
    name = new_container_name(NEVER)
    collection = type(client.containers)  # docker-py makes a new collection on each access: patch its class
    create = collection.create
    late: list[threading.Thread] = []

    def interrupted_in_flight(self: Any, *args: Any, **kwargs: Any) -> Any:
        def engine_creates_it_late() -> None:
            time.sleep(0.5)
            try:
                create(self, *args, **kwargs)
            except Exception:  # noqa: BLE001 - the name was claimed first: that create fails, as it should
                pass

        late.append(threading.Thread(target=engine_creates_it_late))
        late[0].start()
        raise KeyboardInterrupt  # as the signal would, while the request is in flight

    monkeypatch.setattr(collection, "create", interrupted_in_flight)
    with pytest.raises(KeyboardInterrupt):
        bd.start_container(client, NEVER, name=name, labels=_labels(session))
    late[0].join(30)
    deadline = time.monotonic() + 5  # whichever came first, nothing of ours is left, and stays so
    while time.monotonic() < deadline:
        assert bd.list_managed(client, session_id=session) == []
        time.sleep(0.2)


# --------------------------------------------------------------------------- remove


def test_remove_is_idempotent(client: Any, session: str) -> None:
    name = new_container_name(NEVER)
    info = bd.start_container(client, NEVER, name=name, labels=_labels(session))
    assert _wait_http_status(f"{info.base_url}/health") == 503
    assert bd.remove_container(client, name) is True
    assert bd.remove_container(client, name) is False
    assert bd.remove_container(client, info.id) is False
    assert bd.remove_container(client, "openenv-never-existed-0-000000") is False
    assert bd.container_status(client, info.id) == (bd.STATUS_MISSING, None)
    assert bd.container_logs_tail(client, info.id) == ""


# --------------------------------------------------------------------------- list / remove managed


def test_list_managed_and_prune_never_touch_unlabelled(client: Any, session: str, cleanup: list[str]) -> None:
    managed = new_container_name(NEVER)
    cleanup.append(managed)
    bd.start_container(client, NEVER, name=managed, labels=_labels(session))

    # an unlabelled container of the same image, and one that says managed=0
    plain = client.containers.create(
        NEVER,
        name=new_container_name(NEVER) + "-plain",
        labels={SUITE_LABEL: "test_blocking_docker"},
    )
    cleanup.append(plain.id)
    plain.start()
    decoy = client.containers.create(
        NEVER,
        name=new_container_name(NEVER) + "-decoy",
        labels={
            LABEL_MANAGED: "0",
            LABEL_PID: str(os.getpid()),
            SUITE_LABEL: "test_blocking_docker",
        },
    )
    cleanup.append(decoy.id)

    mine = bd.list_managed(client, all_processes=False)
    assert [s.name for s in mine] == [managed]
    summary = mine[0]
    assert summary.session_id == session and summary.pid == os.getpid()
    assert summary.image == NEVER and summary.state == "running" and summary.created > 0
    everyone = {s.name for s in bd.list_managed(client)}
    assert managed in everyone and plain.name not in everyone and decoy.name not in everyone
    assert [s.name for s in bd.list_managed(client, session_id=session)] == [managed]
    assert bd.list_managed(client, session_id=new_session_id()) == []

    # prune sees only the managed one, and keeps it: its owner (this process) is alive
    # (this test's session only: other xdist workers run this suite's containers at the same time)
    ours = [f"{SUITE_LABEL}=test_blocking_docker", f"{LABEL_SESSION}={session}"]
    verdicts = [(s.name, v) for s, v, _ in bd.prune_containers(client, label_filters=ours)]
    assert verdicts == [(managed, "keep")]
    assert bd.container_status(client, managed) == ("running", None)
    assert bd.container_status(client, plain.id) == ("running", None)
    assert bd.container_status(client, decoy.id)[0] == "created"


# --------------------------------------------------------------------------- prune: ownership


def _identity(**changes: Any) -> dict[str, str]:
    me = procfs.owner_identity()
    assert me is not None
    return {**identity_labels(dataclasses.replace(me, **changes))}


def test_prune_removes_only_what_provably_belongs_to_a_dead_program_here(client: Any, cleanup: list[str]) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_start = procfs.process_start_time(dead.pid) or 1
    dead.wait()
    tag = new_session_id()  # this test's own label: prune here never sees any other container
    base = {LABEL_MANAGED: "1", SUITE_LABEL: tag}
    cases = {
        # a look-alike: managed=1 and a dead PID, but no identity
        "lookalike": {**base, LABEL_PID: str(dead.pid)},
        "dead-here": {**base, **_identity(pid=dead.pid, start_time=dead_start)},
        "alive-here": {**base, **_identity()},
        "reused-pid": {**base, **_identity(start_time=1)},  # this PID, another start time: its owner is gone
        "other-host": {**base, **_identity(pid=dead.pid, start_time=dead_start, host="elsewhere")},
        "other-boot": {**base, **_identity(pid=dead.pid, start_time=dead_start, boot_id="another-boot")},
        "other-ns": {**base, **_identity(pid=dead.pid, start_time=dead_start, pid_namespace="pid:[1]")},
    }
    names = {}
    for case, labels in cases.items():
        created = client.containers.create(NEVER, name=new_container_name(NEVER) + "-" + case, labels=labels)
        cleanup.append(created.id)
        names[created.name] = case

    def verdicts(**kwargs: Any) -> dict[str, str]:
        found = bd.prune_containers(client, label_filters=[f"{SUITE_LABEL}={tag}"], **kwargs)
        return {names[s.name]: v for s, v, _ in found}

    expected = {
        "lookalike": "foreign",
        "dead-here": "remove",
        "alive-here": "keep",
        "reused-pid": "remove",
        "other-host": "foreign",
        "other-boot": "foreign",
        "other-ns": "foreign",
    }
    assert verdicts(dry_run=True) == expected
    assert len(verdicts(dry_run=True)) == len(cases)  # a dry run removed nothing
    assert verdicts() == expected
    assert verdicts() == {k: v for k, v in expected.items() if v != "remove"}  # removed
    assert verdicts(everything=True) == {k: "remove" for k, v in expected.items() if v != "remove"}
    assert verdicts() == {}


def test_a_started_container_carries_its_owners_identity(client: Any, session: str, cleanup: list[str]) -> None:
    name = new_container_name(NEVER)
    cleanup.append(name)
    bd.start_container(client, NEVER, name=name, labels=_labels(session))
    labels = client.api.inspect_container(name)["Config"]["Labels"]
    assert identity_from_labels(labels) == procfs.owner_identity()


# --------------------------------------------------------------------------- pull


def _registry_answers() -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://{REGISTRY}/v2/", timeout=2) as resp:
            status: int = resp.status
            return status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def registry() -> str:
    if not _registry_answers():
        _unavailable(f"no loopback registry answers at {REGISTRY}")
    return REGISTRY


def _drop_image(client: Any, image: str) -> None:
    import docker.errors

    try:
        client.images.remove(image, force=False, noprune=False)
    except docker.errors.ImageNotFound:
        pass


@pytest.mark.xdist_group("registry-images")  # they pull, tag and remove the same images on the one engine
def test_pull_downloads_a_layer(client: Any, registry: str) -> None:
    image = f"{registry}/openenv-pull-probe:latest"
    _drop_image(client, image)
    assert not bd.image_present(client, image)
    lines: list[str] = []
    try:
        image_id = bd.pull_image(client, image, progress=lines.append)
        assert image_id.startswith("sha256:")
        assert bd.image_present(client, image)
        assert any("Pull complete" in line or "Download complete" in line for line in lines), lines
        assert any(line.startswith("Status: Downloaded newer image") for line in lines), lines
        assert all(a != b for a, b in zip(lines, lines[1:], strict=False))  # no repeated lines
    finally:
        _drop_image(client, image)


@pytest.mark.xdist_group("registry-images")  # they pull, tag and remove the same images on the one engine
def test_pull_echo_env_as_from_env_would(client: Any, registry: str) -> None:
    """``from_env("openenv/echo_env")`` maps to ``<registry>/openenv-echo-env:latest``."""
    image = f"{registry}/openenv-echo-env:latest"
    _drop_image(client, image)
    try:
        image_id = bd.pull_image(client, image)  # no progress callback: fine too
        assert bd.image_present(client, image)
        assert client.api.inspect_image(image)["Id"] == image_id
    finally:
        _drop_image(client, image)


@pytest.mark.xdist_group("registry-images")  # they pull, tag and remove the same images on the one engine
def test_pull_without_tag_pulls_latest_only(client: Any, registry: str) -> None:
    image = f"{registry}/openenv-pull-probe"
    try:
        bd.pull_image(client, image)
        assert bd.image_present(client, image + ":latest")
    finally:
        _drop_image(client, image + ":latest")


@pytest.mark.parametrize("ref", ["openenv-no-such-env:latest", "openenv-pull-probe:no-such-tag"])
def test_pull_missing_is_image_not_found(client: Any, registry: str, ref: str) -> None:
    image = f"{registry}/{ref}"
    with pytest.raises(ImageNotFound) as info:
        bd.pull_image(client, image, progress=lambda line: None)
    assert info.value.image == image and image in str(info.value)
    assert not bd.image_present(client, image)


def test_pull_from_unreachable_registry_is_a_provider_error(client: Any) -> None:
    with pytest.raises(ProviderError) as info:
        bd.pull_image(client, "127.0.0.1:9/openenv-echo-env:latest")
    assert not isinstance(info.value, ImageNotFound)


@pytest.mark.parametrize(
    ("image", "how"),
    [
        ("127.0.0.1:9/openenv-echo-env:latest", "docker build -t 127.0.0.1:9/openenv-echo-env:latest"),
        ("echo-env:latest", "python3 scripts/docker_setup.py --echo-only"),
    ],
)
def test_a_missing_image_that_cannot_be_pulled_is_one_short_error(client: Any, image: str, how: str) -> None:
    """Not there locally, no registry: one line saying so and how to build it, no chain of docker-py errors."""
    if image == "echo-env:latest" and bd.image_present(client, image):
        image, how = "openenv-docs-never-built:latest", "docker build -t openenv-docs-never-built:latest"
    with pytest.raises(ImageNotFound) as info:
        bd.pull_if_missing(client, image)
    text = str(info.value)
    assert text.startswith(f"image {image} is not available locally and could not be pulled (")
    assert f"build it with `{how}" in text and text.endswith("or pull it where a registry is reachable")
    assert "\n" not in text and info.value.image == image
    assert info.value.__cause__ is None and info.value.__context__ is None  # the traceback is ours alone


# --------------------------------------------------------------------------- the reaper: a create in flight


def test_the_reaper_waits_for_a_create_still_in_flight(client: Any, session: str, cleanup: list[str]) -> None:
    name = new_container_name(NEVER)
    cleanup.append(name)
    late = threading.Timer(0.5, lambda: client.containers.create(NEVER, name=name, labels=_labels(session)))
    late.start()  # the owner's create lands after the owner died: the first look finds nothing
    try:
        assert bd.reap_container(client, name, session, None, settle=30) == "removed"
    finally:
        late.join()
    assert bd.container_status(client, name) == (bd.STATUS_MISSING, None)


def test_the_reaper_claims_a_name_nobody_created(client: Any, session: str, cleanup: list[str]) -> None:
    name = new_container_name(NEVER)
    cleanup.append(name)
    outcome: list[str] = []

    def create_late() -> None:  # a create the engine gets while the placeholder holds the name
        try:
            client.containers.create(NEVER, name=name, labels=_labels(session))
            outcome.append("created")
        except Exception as exc:  # noqa: BLE001
            outcome.append(type(exc).__name__)

    late = threading.Timer(0.3, create_late)
    late.start()
    try:
        verdict = bd.reap_container(client, name, session, NEVER, hold=1.0)
    finally:
        late.join()
    # whichever came first, nothing of that name is left
    assert (verdict, outcome) in (("never created", ["APIError"]), ("removed", ["created"]))
    assert bd.container_status(client, name) == (bd.STATUS_MISSING, None)
    assert bd.reap_container(client, name, session, MISSING, settle=1) == "never created"  # no image: settled


def test_the_reaper_leaves_a_name_someone_else_holds(client: Any, session: str, cleanup: list[str]) -> None:
    name = new_container_name(NEVER)
    cleanup.append(name)
    client.containers.create(NEVER, name=name, labels=_labels(new_session_id()))
    assert bd.reap_container(client, name, session, NEVER) == "not ours"
    assert bd.container_status(client, name)[0] == "created"

"""Fixtures shared by every suite: real servers on 127.0.0.1, in threads, never on a test's event loop."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv.server import EnvServer
from openenv.server.echo import EchoEnvironment

from . import leaks, ray_clusters
from .envs import BOOT, CounterEnv, ScriptServer


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- tests that must not share a moment (the suite runs under pytest-xdist, see noxfile.py) ------------
#
# Each xdist worker is a process of its own and runs one test at a time, so the leak snapshots
# (tests/leaks.py: threads, fds, children of *this* process) stay exact.  What workers do share is
# the machine: a test marked ``serial`` runs alone.  It takes a file lock exclusively; every other test
# holds it shared while it runs.  A second lock, the turnstile, stops new tests from starting while a
# serial test waits, so it gets its turn.  Without xdist (``-n 0``, or a plain ``pytest``) nothing is locked,
# unless $OPENENV_TWIN_TEST_LOCKS names a folder already: .ci/run sets one for all the suites it runs side
# by side, so that a serial test runs alone on the machine, not only within its own session.

#: where the controller puts the lock files of one run (its workers inherit the variable)
LOCK_DIR_ENV = "OPENENV_TWIN_TEST_LOCKS"
_LOCKS: list[Any] = []


def _restore_ctrl_c() -> None:
    """Make Ctrl-C raise ``KeyboardInterrupt`` again when the launcher ignored it.

    A shell without job control starts background commands (``cmd &``, ``nohup``)
    with SIGINT ignored, and Python keeps it ignored; the Ctrl-C tests
    (``_thread.interrupt_main``, ``os.kill(pid, SIGINT)``) then see no interrupt.
    The suite must not depend on how it was launched, and each xdist worker is a
    process of its own, so this runs in every one of them.
    """
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config: pytest.Config) -> None:
    import os
    import shutil
    import tempfile

    _restore_ctrl_c()
    if sys.version_info < (3, 11):
        # Python 3.10's asyncio SSL server protocol makes its app transport before the TLS
        # handshake and never closes it when the handshake fails (a client that rejects the
        # certificate, as the verify= tests do): its __del__ warns "unclosed transport" in a
        # later test.  The socket itself is closed; 3.11's rewritten sslproto has no such object.
        config.addinivalue_line(
            "filterwarnings", "ignore:unclosed transport <asyncio.sslproto._SSLProtocolTransport:ResourceWarning"
        )
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return  # an xdist worker (it inherited the variable), or no workers at all
    groups = tempfile.mkdtemp(prefix="openenv-twin-xdist-groups-")  # one per run: see _GroupsOnOneWorker
    os.environ[GROUPS_DIR_ENV] = groups
    config.add_cleanup(lambda: shutil.rmtree(groups, ignore_errors=True))
    if os.environ.get(LOCK_DIR_ENV):
        return  # set from outside: .ci/run shares one folder between the suites it runs side by side
    folder = tempfile.mkdtemp(prefix="openenv-twin-test-locks-")
    os.environ[LOCK_DIR_ENV] = folder
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


def pytest_unconfigure(config: pytest.Config) -> None:
    while _LOCKS:
        _LOCKS.pop().close()
    while _GROUP_LOCKS:
        _GROUP_LOCKS.popitem()[1].close()


def _run_locks(config: pytest.Config) -> list[Any]:
    """The turnstile and room lock files of this run (opened once per worker), or ``[]`` when not locking.

    An xdist worker locks; so does a run without workers (``-n 0``, ``nox -s ray``) when the folder
    was set from outside (.ci/run runs several suites side by side); the xdist controller never does.
    """
    import os

    folder = os.environ.get(LOCK_DIR_ENV)
    controller = not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None))
    if not folder or controller:
        return []
    if not _LOCKS:
        for name in ("turnstile", "room"):
            _LOCKS.append(open(os.path.join(folder, name), "a+b"))  # held for the worker's life
    return _LOCKS


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    import fcntl

    locks = _run_locks(item.config)
    if not locks:
        yield
        return
    turnstile, room = locks
    if item.get_closest_marker("serial") is not None:
        fcntl.flock(turnstile, fcntl.LOCK_EX)  # held until the end: no test starts meanwhile
        fcntl.flock(room, fcntl.LOCK_EX)  # the running ones finish first
        try:
            yield
        finally:
            fcntl.flock(room, fcntl.LOCK_UN)
            fcntl.flock(turnstile, fcntl.LOCK_UN)
    else:
        fcntl.flock(turnstile, fcntl.LOCK_SH)
        fcntl.flock(room, fcntl.LOCK_SH)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        # xdist_group: one test of a group at a time, whichever worker runs it.  xdist 3.8's loadgroup
        # renames item._nodeid, which pytest 9.2's items no longer read, so it does not pin groups itself.
        groups = [
            _group_lock(item.config, str(m.args[0] if m.args else m.kwargs.get("name", "default")))
            for m in item.iter_markers("xdist_group")
        ]
        for lock in groups:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            for lock in groups:
                fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(room, fcntl.LOCK_UN)


_GROUP_LOCKS: dict[str, Any] = {}

#: where the workers of one run tell the controller which xdist_group each test is in
GROUPS_DIR_ENV = "OPENENV_TWIN_XDIST_GROUPS"


def _xdist_group_names(item: pytest.Item) -> list[str]:
    return sorted(
        {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker: write each grouped test's ``xdist_group`` for the controller's scheduler."""
    import json
    import os

    folder = os.environ.get(GROUPS_DIR_ENV)
    worker = getattr(config, "workerinput", {}).get("workerid")
    if not folder or not worker:
        return
    groups = {item.nodeid: "_".join(names) for item in items if (names := _xdist_group_names(item))}
    path = os.path.join(folder, f"{worker}.json")
    with open(path + ".tmp", "w", encoding="utf-8") as out:
        json.dump(groups, out)
    os.replace(path + ".tmp", path)  # complete before this worker reports its collection


def _groups_on_one_worker(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` that keeps each ``xdist_group`` on one worker, as xdist documents it.

    xdist 3.8 marks a grouped test by renaming ``item._nodeid`` to ``<nodeid>@<group>``,
    which pytest 9.2's items no longer read, so its scheduler sees every test as a group of
    its own.  This one reads the groups that the workers wrote (pytest_collection_modifyitems
    above; every worker has written its file before it reports its collection, and the
    scheduler splits the collection only once all have reported).  Tests of a group that share
    per-process state (servers, a released client's run: tests/interop) then share it, and a
    group's tests no longer wait on each other's lock from two workers.
    """
    import glob
    import json
    import os

    from xdist.scheduler import LoadGroupScheduling  # type: ignore[import-untyped]  # xdist ships no types

    class GroupsOnOneWorker(LoadGroupScheduling):  # type: ignore[misc]  # untyped base
        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                files = sorted(glob.glob(os.path.join(os.environ[GROUPS_DIR_ENV], "*.json")))
                with open(files[0], encoding="utf-8") as found:  # the collections are identical
                    self._groups = dict(json.load(found))
            group = self._groups.get(nodeid)
            return f"group:{group}" if group is not None else nodeid

    return GroupsOnOneWorker(config, log)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    import os

    if config.getvalue("dist") != "loadgroup" or not os.environ.get(GROUPS_DIR_ENV):
        return None
    return _groups_on_one_worker(config, log)


def _group_lock(config: pytest.Config, name: str) -> Any:
    import os

    if name not in _GROUP_LOCKS:
        folder = os.environ[LOCK_DIR_ENV]
        _GROUP_LOCKS[name] = open(os.path.join(folder, "group-" + name.replace("/", "_")), "a+b")
    return _GROUP_LOCKS[name]


@pytest.fixture(scope="session")
def echo_server() -> Iterator[EnvServer]:
    with EnvServer(EchoEnvironment, host="127.0.0.1", port=0, max_sessions=64) as server:
        yield server


@pytest.fixture(scope="session")
def counter_server() -> Iterator[EnvServer]:
    with EnvServer(CounterEnv, host="127.0.0.1", port=0, max_sessions=64) as server:
        yield server


@pytest.fixture
def server_factory() -> Iterator[Callable[..., EnvServer]]:
    """Start extra servers (stopped at the end of the test): ``server_factory(CounterEnv, max_sessions=1)``."""
    started: list[EnvServer] = []

    def start(factory: Any = CounterEnv, **kwargs: Any) -> EnvServer:
        kwargs.setdefault("host", "127.0.0.1")
        kwargs.setdefault("port", 0)
        server = EnvServer(factory, **kwargs).start()
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()


@pytest.fixture
def asgi_server_factory() -> Iterator[Callable[..., Any]]:
    """uvicorn serving ``openenv.server.asgi.create_app(factory, **kwargs)`` (stopped at the end of the test)."""
    from .asgi_server import AsgiServer

    started: list[AsgiServer] = []

    def start(factory: Any = CounterEnv, **kwargs: Any) -> AsgiServer:
        server = AsgiServer(factory, **kwargs)
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()


@pytest.fixture
def script_server() -> Iterator[Callable[[Callable[[str], Any]], ScriptServer]]:
    """Start raw WebSocket servers that answer frames with a script."""
    started: list[ScriptServer] = []

    def start(reply: Callable[[str], Any]) -> ScriptServer:
        server = ScriptServer(reply)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture
def free_port() -> int:
    """A loopback port with nothing listening on it (below the ephemeral range: no port-0 server takes it)."""
    from openenv._blocking.process import free_port as pick

    return pick()


class TlsFiles:
    """A throwaway CA and a server certificate for 127.0.0.1 (PEM files)."""

    def __init__(self, ca: str, cert: str, key: str) -> None:
        self.ca, self.cert, self.key = ca, cert, key

    def server_context(self) -> Any:
        import ssl

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        return context  # TLS 1.3 with session tickets (Python's default: 2 per connection)


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """A CA and a server certificate signed by it, valid for 127.0.0.1 and localhost."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "openenv test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    ca_path, cert_path, key_path = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return TlsFiles(str(ca_path), str(cert_path), str(key_path))


@pytest.fixture(scope="session")
def tls_server(tls_files: TlsFiles) -> Iterator[EnvServer]:
    """A counter server behind TLS (``https://127.0.0.1:<port>``), its certificate signed by ``tls_files.ca``."""
    server = EnvServer(CounterEnv, host="127.0.0.1", port=0, max_sessions=64, ssl=tls_files.server_context())
    with server:
        yield server


# -- the interop matrix (tests/interop/conftest.py records it) ------------------------------------------
#
# Each test's rows ride on its teardown report, so they arrive here in the process that reports: the
# xdist controller when workers ran the tests, this process otherwise.

_INTEROP_ROWS: set[tuple[str, ...]] = set()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, rows in report.user_properties:
        if name == "interop_matrix":
            recorded: list[list[object]] = rows  # type: ignore[assignment]  # user_properties are (str, object)
            _INTEROP_ROWS.update(tuple(str(cell) for cell in row) for row in recorded)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the interop matrix (and write it to ``$OPENENV_INTEROP_MATRIX`` as JSON) when interop tests ran."""
    import json
    import os

    if not _INTEROP_ROWS:
        return
    rows = [("client", "server", "operation", "outcome", "note"), *sorted(_INTEROP_ROWS)]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    terminalreporter.section("OpenEnv interop matrix")
    for index, row in enumerate(rows):
        terminalreporter.write_line("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
        if index == 0:
            terminalreporter.write_line("  ".join("-" * w for w in widths))
    out = os.environ.get("OPENENV_INTEROP_MATRIX")
    if out:
        Path(out).write_text(json.dumps([dict(zip(rows[0], row, strict=True)) for row in rows[1:]], indent=1))


ECHO_IMAGE = "openenv-test/echo:latest"


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[Any]:
    """A docker-py client of a live engine with the test images; skipped without one (failed under CI).

    ``python3 scripts/docker_setup.py`` (run by ``nox -s docker``) starts the
    engine and builds the images.  At the end, no container labelled
    ``org.openenv.managed=1`` may be left.
    """
    import os

    from openenv._blocking.docker import connect_client  # closes its socket when the engine does not answer

    client = None
    try:
        client = connect_client(30)
        client.images.get(ECHO_IMAGE)
    except Exception as exc:  # noqa: BLE001 - any failure means: no usable engine
        if client is not None:
            client.close()
        if os.environ.get("CI"):
            pytest.fail(f"no usable Docker engine under CI: {exc}")
        pytest.skip(f"no usable Docker engine ({exc}); run python3 scripts/docker_setup.py")
    import docker

    yield client
    ours = leaks.managed_containers(client)  # one listing: a container being removed is no NotFound
    for name in ours:
        try:
            client.api.remove_container(name, force=True)
        except docker.errors.NotFound:
            pass
    client.close()
    assert ours == [], f"containers left behind: {ours}"


# --------------------------------------------------------------------------- tests/openenv_envs

OPENENV_ENVS = Path(__file__).resolve().parent / "openenv_envs"
#: image of each environment folder, built by scripts/docker_setup.py
OPENENV_ENV_IMAGES = {"mcp_guess": "openenv-test/mcp-guess:latest", "duel": "openenv-test/duel:latest"}
#: sessions each served environment allows (the TRL-shaped tests open several at once)
OPENENV_ENV_CAPACITY = 16


class OpenEnvEnvs:
    """Servers of ``tests/openenv_envs/<name>`` (OpenEnv's layout, the released 0.3.0 server).

    Kind ``venv``: ``python -m uvicorn server.app:app`` with the openenv-core
    0.3.0 venv's Python, the env folder as cwd and PYTHONPATH.  Kind ``docker``:
    the env's image (built by ``scripts/docker_setup.py``), published on
    127.0.0.1.  Each is started on first use, shared by the session, and stopped
    at its end (processes by PID, containers removed).
    """

    def __init__(self, kind: str, tmp: Path, engine: Any = None) -> None:
        self.kind = kind
        self._tmp = tmp
        self._engine = engine
        self._urls: dict[str, str] = {}
        self._stops: list[Callable[[], None]] = []

    def url(self, name: str) -> str:
        """The base URL of the environment folder ``name``, started if needed."""
        if name not in self._urls:
            self._urls[name] = self._start_venv(name) if self.kind == "venv" else self._start_docker(name)
        return self._urls[name]

    def _start_venv(self, name: str) -> str:
        import os
        import subprocess

        from .interop.conftest import _wait_healthy, spawn_listening, venv_python

        folder = OPENENV_ENVS / name
        env = {**os.environ, "PYTHONPATH": str(folder), "MAX_CONCURRENT_ENVS": str(OPENENV_ENV_CAPACITY)}
        env["ENABLE_WEB_INTERFACE"] = "false"
        command = [str(venv_python("0.3.0")), "-m", "uvicorn", "server.app:app", "--fd", "{fd}"]
        command += ["--log-level", "warning"]
        log = self._tmp / f"{name}-venv.log"
        proc, url = spawn_listening(command, folder, env, log)  # the port is the server's from the start

        def stop() -> None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

        try:
            _wait_healthy(url, proc, log)
        except BaseException:
            stop()
            raise
        self._stops.append(stop)
        return url

    def _start_docker(self, name: str) -> str:
        import os

        from openenv.sync import DockerProvider

        image = OPENENV_ENV_IMAGES[name]
        try:
            self._engine.images.get(image)
        except Exception as exc:  # noqa: BLE001 - image missing: say how to build it
            message = f"{image} is missing ({exc}); run python3 scripts/docker_setup.py"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        provider = DockerProvider(image, env_vars={"MAX_CONCURRENT_ENVS": str(OPENENV_ENV_CAPACITY)}, pull=False)
        url = provider.start()
        try:
            provider.wait_until_ready(url, BOOT)  # a released server's stack: see BOOT
        except BaseException:
            provider.stop()
            raise
        self._stops.append(provider.stop)
        return url

    def stop(self) -> None:
        for stop in reversed(self._stops):
            stop()
        self._stops.clear()


#: the ``xdist_group`` of the tests on `openenv_venv_envs` (session-scoped, so per worker)
VENV_ENVS_GROUP = "openenv-venv-envs"


@pytest.fixture(scope="session")
def openenv_venv_envs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenEnvEnvs]:
    """The environments of ``tests/openenv_envs`` served from the openenv-core 0.3.0 venv."""
    found = OpenEnvEnvs("venv", tmp_path_factory.mktemp("openenv-envs"))
    try:
        yield found
    finally:
        found.stop()


@pytest.fixture(scope="module")  # module: other docker tests assert that none of our containers is left
def openenv_docker_envs(docker_engine: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenEnvEnvs]:
    """The environments of ``tests/openenv_envs`` served from their Docker images."""
    found = OpenEnvEnvs("docker", tmp_path_factory.mktemp("openenv-envs"), docker_engine)
    try:
        yield found
    finally:
        found.stop()


@pytest.fixture(
    params=[
        # one worker runs them all too (VENV_ENVS_GROUP): each openenv-core server (5-7 s of CPU to import its
        # stack) starts once per run, not once on every worker that happens to get one of these tests
        pytest.param("venv", marks=[pytest.mark.interop, pytest.mark.xdist_group(VENV_ENVS_GROUP)], id="venv"),
        # one worker runs them all, so each module's containers boot once (--dist loadgroup), not on every worker
        pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.xdist_group("openenv-docker-envs")], id="docker"),
    ]
)
def openenv_envs(request: pytest.FixtureRequest) -> OpenEnvEnvs:
    """Each environment of ``tests/openenv_envs`` served both ways (marked ``interop`` / ``docker``)."""
    served: OpenEnvEnvs = request.getfixturevalue(f"openenv_{request.param}_envs")
    return served


# -- local Ray clusters (-m ray; tests/ray_clusters.py) ---------------------------------

RAY_CLUSTER_ENV = ray_clusters.RAY_CLUSTER_ENV


@pytest.fixture(scope="session")
def ray_module() -> Iterator[Any]:
    """The ``ray`` module, imported once its environment is set (``RAY_CLUSTER_ENV``, for the whole run)."""
    import importlib

    with pytest.MonkeyPatch.context() as patch:
        for key, value in RAY_CLUSTER_ENV.items():
            patch.setenv(key, value)
        if "ray" in sys.modules:
            pytest.fail("Ray was imported before its environment was set; the cluster would not be on loopback")
        ray = importlib.import_module("ray")
        try:
            yield ray
        finally:
            ray_clusters.disconnect(ray)


@pytest.fixture(scope="session")
def _ray_session_cluster(ray_module: Any) -> Iterator[Any]:
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "resources": {"env_slot": 2},
            "node_ip_address": "127.0.0.1",
            "include_dashboard": False,
        },
    )
    try:
        yield cluster
    finally:
        ray_clusters.disconnect(ray_module)
        processes = ray_clusters.cluster_processes(cluster)
        cluster.shutdown()
        ray_clusters.wait_gone(processes, "the session's Ray cluster after shutdown")


@pytest.fixture(scope="module")
def ray_cluster(ray_module: Any, _ray_session_cluster: Any) -> str:
    """One single-node Ray cluster for the whole run, on loopback, with the driver connected; its GCS address.

    2 CPUs and 2 units of a custom resource ``env_slot``; shut down at the end.  Module-scoped: each
    module that uses it reconnects the driver (a test of ``ray_nodes`` connected it to a cluster of its own).
    """
    address = str(_ray_session_cluster.address)
    ray_clusters.connect(ray_module, address)
    return address


@pytest.fixture
def ray_nodes(ray_module: Any) -> Iterator[Callable[..., ray_clusters.LoopbackCluster]]:
    """Starts a multi-node Ray cluster of this test's own (``ray_nodes(3)``), connected; stopped after it.

    Its teardown fails the test if a process of the cluster (raylet, GCS, agent, worker) outlives it.
    """
    made: list[ray_clusters.LoopbackCluster] = []

    def start(nodes: int, **options: Any) -> ray_clusters.LoopbackCluster:
        made.append(ray_clusters.LoopbackCluster(ray_module, nodes, **options))
        return made[-1]

    try:
        yield start
    finally:
        for cluster in made:
            cluster.shutdown()

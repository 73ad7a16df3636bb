# GENERATED from tests/_async/test_servers.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Servers that hold one session: the pools and ``environment_factory`` start one server per session.

``solo_echo`` is a checkout in OpenEnv's layout served by our ASGI server with
``max_sessions=1`` (it runs in the test venv); ``grid_world_env`` is the same
shape served by the released openenv-core 0.3.0, whose servers hold one session
by default (interop).  Each observation of solo_echo carries its server's PID.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from openenv._blocking import process_registry
from openenv._blocking.procfs import process_start_time
from openenv._core.lifetimes import parse_start_time
from openenv.sync import CapacityReached, ConnectError, Env, EnvPool, PoolError, SessionLost, environment_factory

from ..envs import BOOT, IN_TIME
from ..helpers_sync import until
from ..leaks import alive, servers_in

ENVS = Path(__file__).resolve().parent.parent / "openenv_envs"


def _checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str = "solo_echo") -> str:
    target = tmp_path / name
    shutil.copytree(ENVS / name, target)
    monkeypatch.setenv("PATH", str(tmp_path / "no-uv-here"))  # the current interpreter runs it
    return str(target)


def _group(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``."""
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as stat:
                state, _, group = stat.read().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(group) == pgid and state != "Z":
            found.append(int(name))
    return found


def _started(pid: int) -> int:
    """The start time of process ``pid``: with its PID, what names it (PIDs are reused, 32,768 of them here)."""
    start = process_start_time(pid)
    assert start is not None, f"process {pid} is not running"
    return start


def _let_go(pid: int, start: int) -> bool:
    """Whether server (``pid``, ``start``) is gone and no provider holds it any more: reaped (not even a
    zombie of this process) and out of the registry ``python -m openenv prune`` reads (its lease released).

    By start time as well as PID: in a CI run the PIDs wrap, so another process (or a record another
    test's killed owner left behind) may carry the same PID."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            running = parse_start_time(handle.read()) == start  # a zombie too: it has its start time
    except OSError:
        running = False
    return not running and all((r.pid, r.start_time) != (pid, start) for r in process_registry.list_records())


def test_environment_factory_starts_a_server_per_session_of_a_one_session_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = _checkout(tmp_path, monkeypatch)
    cls = environment_factory(checkout, ready_timeout=60, capacity_timeout=30)
    try:
        instances = [cls(), cls(), cls()]  # TRL: one instance per rollout of the generation batch
        first = [instance.reset() for instance in instances]
        assert all("ready" in (text or "") for text in first)
        steps = [instance.step(message=f"m{i}") for i, instance in enumerate(instances)]
        assert [f"m{i}" in text for i, text in enumerate(steps)] == [True] * 3  # (whatever the rendering)
        assert [instance.reward for instance in instances] == [1.0, 1.0, 1.0]
        servers = servers_in(checkout)  # one server per instance, the OS says
        assert len(servers) == 3
        assert _served_by(instances) == servers  # each instance on a server of its own
        providers = {instance.env.provider for instance in instances}  # type: ignore[union-attr]
        assert providers == {None}  # the instances' clients own no server: the class does
        # an instance that closes frees its server's slot: the next reset goes there, no fourth server
        instances[1].close()
        again = cls()
        again.reset()
        assert servers_in(checkout) == servers and (_served_by([again])) <= servers
    finally:
        cls.close()
    assert not any(alive(pid) for pid in servers)


def test_environment_factory_waits_at_max_servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = _checkout(tmp_path, monkeypatch)
    cls = environment_factory(checkout, ready_timeout=60, capacity_timeout=3, max_servers=2)
    try:
        a, b, c = cls(), cls(), cls()
        a.reset()
        b.reset()
        with pytest.raises(CapacityReached, match=r"raise max_servers \(now 2\)"):
            c.reset()
        assert len(servers_in(checkout)) == 2  # no third server was started
        a.close()
        # a's server has room again, once it has seen a's session end (a moment after close(): each
        # retry here is one capacity_timeout of 3 s, so a loaded machine gets up to 30 s in all)
        for attempt in range(10):
            try:
                c.reset()
                break
            except CapacityReached:
                if attempt == 9:
                    raise
    finally:
        cls.close()


def test_starting_one_more_server_does_not_eat_the_capacity_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each server takes longer to come up than the capacity_timeout, and 0.5 s to free the slot of the
    # client that started it. b's reset starts the second server (bounded by ready_timeout), is refused
    # while that slot is freed, and must still get its whole capacity_timeout of waiting (IN_TIME to spare).
    checkout = _checkout(tmp_path, monkeypatch)
    capacity_timeout = IN_TIME + 1.0
    slow = {"SOLO_ECHO_START_DELAY": str(capacity_timeout + 1.0), "SOLO_ECHO_CLOSE_DELAY": "0.5"}
    cls = environment_factory(
        checkout, ready_timeout=60, capacity_timeout=capacity_timeout, max_servers=2, env_vars=slow
    )
    try:
        a, b = cls(), cls()
        a.reset()
        b.reset()
        assert len(_served_by([a, b])) == 2 and len(servers_in(checkout)) == 2
    finally:
        cls.close()


def test_a_pool_of_a_one_session_checkout_runs_a_server_per_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = _checkout(tmp_path, monkeypatch)
    imports = tmp_path / "imports"
    monkeypatch.setenv("SOLO_ECHO_IMPORTS", str(imports))
    with EnvPool.from_env(checkout, size=3, ready_timeout=60) as pool:
        servers = servers_in(checkout)
        assert len(servers) == 3
        pool.reset()
        results = pool.step([{"message": f"s{i}"} for i in range(3)])
        assert [r.observation["echoed_message"] for r in results] == ["s0", "s1", "s2"]
        assert {r.observation["server_pid"] for r in results} == servers
    assert not any(alive(pid) for pid in servers)
    # the checkout was probed once (can this interpreter import the app?), not once per server
    assert sorted(imports.read_text().split()) == ["probe", "server", "server", "server"]


def test_a_pool_over_max_servers_of_one_session_servers_says_how_many_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = _checkout(tmp_path, monkeypatch)
    with pytest.raises(CapacityReached, match="pass max_servers=3") as info:
        EnvPool.from_env(checkout, size=3, max_servers=2, ready_timeout=60, capacity_timeout=60)
    assert info.value.max_sessions == 1


@pytest.mark.interop
def test_openenv_core_servers_of_one_session_per_instance_and_per_pool_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # grid_world_env on openenv-core 0.3.0 (no max_concurrent_envs: one session per server)
    from tests.interop.conftest import venv_python

    checkout = _checkout(tmp_path, monkeypatch, "grid_world_env")
    (Path(checkout) / ".venv").symlink_to(venv_python("0.3.0").parent.parent, target_is_directory=True)
    # two of each: one more server per instance or session shows as well as three (an openenv-core server
    # costs 5 s of CPU to start, and this runs on three suites' legs)
    cls = environment_factory(checkout, ready_timeout=120, capacity_timeout=60)
    try:
        instances = [cls(), cls()]
        for instance in instances:
            assert "Welcome to Grid World" in (instance.reset() or "")
            assert "Keep going" in instance.step(action="DOWN")
        servers = servers_in(checkout)  # one server per instance, the OS says
    finally:
        cls.close()
    assert len(servers) == 2 and not any(alive(pid) for pid in servers)
    with EnvPool.from_env(checkout, size=2, ready_timeout=120) as pool:
        servers = servers_in(checkout)
        pool.reset()
        results = pool.step([{"action": "RIGHT"}] * 2)
        assert [(r.observation["x"], r.observation["y"]) for r in results] == [(0, 1)] * 2
    assert len(servers) == 2 and not any(alive(pid) for pid in servers)


def test_max_servers_puts_sessions_on_fewer_servers_that_hold_them(tmp_path: Path) -> None:
    from openenv.sync import ProcessProvider

    made: list[Any] = []

    def factory(index: int) -> Any:
        home = tmp_path / f"server{index}"  # a directory of its own: the OS tells the servers apart by it
        home.mkdir()
        provider = ProcessProvider.for_environment("echo", max_sessions=2, cwd=str(home))
        made.append((index, provider))
        return provider

    with EnvPool.from_provider(factory, size=4, max_servers=2, ready_timeout=60) as pool:
        assert [index for index, _ in made] == [0, 1]  # two servers, sessions round-robin on them
        providers = pool.providers
        assert [providers.index(p) for p in providers] == [0, 1, 0, 1]
        pool.reset()
        assert len(pool.step([{"message": "x"}] * 4)) == 4
        # replacing a session of a shared server keeps the server (the other session goes on)
        pool.replace(2)
        assert pool.providers[2] is providers[0] and len(made) == 2
        # growing past what the servers hold: the refusal says how many servers it takes, at once
        with pytest.raises(CapacityReached, match=r"pass max_servers=3") as info:
            pool.resize(5)
        assert (info.value.max_sessions, len(pool), len(made)) == (2, 4, 2)  # nothing added, no server started
        # shrinking stops a server only when none of its sessions is left
        first, second = servers_in(tmp_path / "server0"), servers_in(tmp_path / "server1")
        assert len(first) == 1 and len(second) == 1
        pool.resize(1)
        assert not any(alive(pid) for pid in second)
        assert servers_in(tmp_path / "server0") == first and len(pool.step([{"message": "y"}])) == 1
    assert not any(alive(pid) for pid in first)


def _served_by(instances: Any) -> set[int]:
    """The PIDs of the servers that answer ``instances`` (solo_echo's observations carry their server's PID)."""
    pids = set()
    for instance in instances:
        result = instance.env.step({"message": "whose?"})
        pids.add(result.observation["server_pid"])
    return pids


def _managed(engine: Any) -> list[str]:
    import os

    # filtered by our PID in the engine: another worker may remove its own containers while a listing inspects them
    mine = f"org.openenv.pid={os.getpid()}"
    left = engine.containers.list(all=True, filters={"label": ["org.openenv.managed=1", mine]})
    # not the watchdog container that runs beside them (openenv._blocking.watchdog)
    return [
        c.name
        for c in left
        if c.labels.get("org.openenv.pid") == str(os.getpid()) and c.labels.get("org.openenv.role") != "watchdog"
    ]


@pytest.mark.docker
def test_one_session_containers_per_instance_and_per_pool_session(docker_engine: Any) -> None:
    import os

    # environment_factory of a Space id: its image from the test registry (our echo server, made to hold one
    # session: `serve echo` allows 8 unless MAX_CONCURRENT_ENVS says otherwise)
    registry = os.environ.get("OPENENV_TEST_REGISTRY", "127.0.0.1:5000")
    one = {"MAX_CONCURRENT_ENVS": "1"}
    before = set(_managed(docker_engine))
    try:
        cls = environment_factory(
            "openenv/echo_env", registry=registry, env_vars=one, ready_timeout=BOOT, capacity_timeout=60
        )
        try:
            instances = [cls(), cls(), cls()]
            for i, instance in enumerate(instances):
                instance.reset()
                assert f"c{i}" in instance.step(message=f"c{i}")
            assert len(set(_managed(docker_engine)) - before) == 3  # one container per instance
        finally:
            cls.close()
        assert set(_managed(docker_engine)) == before
    finally:
        try:
            docker_engine.images.remove(f"{registry}/openenv-echo-env:latest", force=True)  # keep pulls real
        except Exception:  # noqa: BLE001 - absent already
            pass
    # a pool of mcp_guess's image (openenv-core 0.3.0's server) with MAX_CONCURRENT_ENVS=1
    image = "openenv-test/mcp-guess:latest"
    try:
        docker_engine.images.get(image)
    except Exception as exc:  # noqa: BLE001 - image missing: say how to build it
        pytest.skip(f"{image} is missing ({exc}); run python3 scripts/docker_setup.py")
    with EnvPool.from_docker_image(image, size=3, env_vars=one, ready_timeout=BOOT) as pool:
        assert len(set(_managed(docker_engine)) - before) == 3
        results = pool.reset(seed=[1, 2, 3])
        assert all(r.observation["message"].startswith("Guess a number") for r in results)
    assert set(_managed(docker_engine)) == before


def test_every_instance_on_a_server_that_died_gets_a_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # two sessions on one server: the first instance to meet its death stops it; the second must hear the same
    checkout = _checkout(tmp_path, monkeypatch)
    app = Path(checkout) / "server" / "app.py"
    app.write_text(app.read_text().replace("max_sessions=1", "max_sessions=2"))
    cls = environment_factory(checkout, ready_timeout=BOOT, capacity_timeout=BOOT, max_servers=2)
    try:
        a, b = cls(), cls()
        a.reset()
        b.reset()
        (pid,) = servers_in(checkout)
        assert _served_by([a, b]) == {pid}  # both sessions on the one server
        os.kill(pid, signal.SIGKILL)
        for instance in (a, b):
            with pytest.raises(SessionLost, match=r"(?s)instance died.*next reset\(\) starts a new server.*code -9"):
                instance.step(message="lost")
        with pytest.raises(SessionLost, match=r"(?s)instance died.*code -9"):  # a second tool call: the same answer
            a.step(message="lost again")
        assert "ready" in (b.reset() or "")  # a new server, for b too
        assert "m1" in (b.step(message="m1"))
        assert "ready" in (a.reset() or "")
        assert "m2" in (a.step(message="m2"))
        (new,) = servers_in(checkout)  # one new server, for both: max_sessions=2 holds them
        assert new != pid and not alive(pid) and _served_by([a, b]) == {new}
    finally:
        cls.close()


def test_environment_factory_replaces_a_server_that_died(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 32: a one-session checkout, max_servers=2, one instance's server process killed
    checkout = _checkout(tmp_path, monkeypatch)
    cls = environment_factory(checkout, ready_timeout=60, capacity_timeout=30, max_servers=2)
    try:
        a, b = cls(), cls()
        a.reset()
        b.reset()
        servers = servers_in(checkout)
        assert len(servers) == 2
        (pid,) = _served_by([a])
        start = _started(pid)
        (kept,) = servers - {pid}
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(
            SessionLost, match=r"(?s)the server of this \w+ instance died.*next reset\(\) starts a new server.*code -9"
        ):
            a.step(message="lost")
        assert _let_go(pid, start)  # reaped, its lease released
        until(lambda: not _group(pid))  # nothing left of its process group (the lifeline's watcher)
        assert servers_in(checkout) == {kept}
        assert "m1" in (b.step(message="m1"))  # the other instance never noticed
        assert "ready" in (a.reset() or "")  # a new server, within max_servers=2 (its slot was freed)
        assert "m2" in (a.step(message="m2"))
        (new,) = servers_in(checkout) - {kept}
        assert new != pid and _served_by([a]) == {new}
        # a new instance whose placement meets a dead server is moved too: kill b's, then reset c
        c = cls()
        os.kill(kept, signal.SIGKILL)
        b.close()  # b's slot is free, so c goes to b's dead server first
        assert "ready" in (c.reset() or "")
        (moved,) = _served_by([c])
        assert moved not in (kept, new) and servers_in(checkout) == {new, moved}
    finally:
        cls.close()


def test_a_pool_says_replace_when_a_server_it_started_died(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 32: reset() would only reach the dead address again; replace(i) starts a new server
    checkout = _checkout(tmp_path, monkeypatch)
    with EnvPool.from_env(checkout, size=2, ready_timeout=60) as pool:
        first = pool.reset()
        dead = pool.providers[0]
        os.kill(first[0].observation["server_pid"], signal.SIGKILL)
        with pytest.raises(PoolError) as info:
            pool.step([{"message": "a"}, {"message": "b"}])
        error = info.value.errors[0]
        assert isinstance(error, SessionLost) and "pool.replace(0) starts a new server" in str(error)
        assert "code -9" in str(error) and info.value.results[1] is not None  # the other session went on
        assert "ready" in str((pool.replace(0)).observation)
        assert pool.providers[0] is not dead


def test_a_pool_replaces_each_session_of_a_shared_server_that_died(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # max_servers=1: both sessions on one server; replace(i), as the error says, must start a new server for each
    checkout = _checkout(tmp_path, monkeypatch)
    app = Path(checkout) / "server" / "app.py"
    app.write_text(app.read_text().replace("max_sessions=1", "max_sessions=2"))
    with EnvPool.from_env(checkout, size=2, max_servers=1, ready_timeout=BOOT) as pool:
        first = pool.reset()
        dead = pool.providers[0]
        pid = first[0].observation["server_pid"]
        start = _started(pid)
        assert {r.observation["server_pid"] for r in first} == {pid}  # one server for both sessions
        assert [p is dead for p in pool.providers] == [True, True]
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(PoolError) as info:
            pool.step([{"message": "a"}, {"message": "b"}])
        for index in (0, 1):
            assert f"pool.replace({index}) starts a new server" in str(info.value.errors[index])
        assert "ready" in str((pool.replace(0)).observation)
        assert "ready" in str((pool.replace(1)).observation)
        assert [p is dead for p in pool.providers] == [False, False]
        assert pool.providers[0] is pool.providers[1]  # max_servers=1 holds: both moved to the one new server
        assert _let_go(pid, start)  # the dead one was stopped (reaped, its lease released) once no session named it
        after = pool.step([{"message": "c"}, {"message": "d"}])
        assert len({r.observation["server_pid"] for r in after} - {pid}) == 1


def test_a_client_whose_own_server_died_says_reset_cannot_help(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = _checkout(tmp_path, monkeypatch)
    with Env.from_env(checkout, ready_timeout=60) as env:
        first = env.reset()
        os.kill(first.observation["server_pid"], signal.SIGKILL)
        with pytest.raises(SessionLost, match=r"(?s)server this client started died.*reset\(\) cannot bring it back"):
            env.step({"message": "lost"})
        with pytest.raises(ConnectError, match=r"(?s)reset\(\) cannot bring it back.*code -9"):
            env.reset()

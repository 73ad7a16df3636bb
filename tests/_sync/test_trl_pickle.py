# GENERATED from tests/_async/test_trl_pickle.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Generated classes pickle by recipe and work in a ``spawn``ed child, as TRL's AsyncGRPOTrainer needs (written once).

TRL's ``AsyncRolloutWorker`` pickles ``environment_factory`` (a class, or a
dict of them) into a child process started with ``multiprocessing``'s
``spawn`` method.  These tests do the same with a real spawned child.
"""

from __future__ import annotations

import copyreg
import functools
import multiprocessing
import os
import pickle
import shutil
import signal
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from openenv._shim_sync import run_to_completion
from openenv.sync import ConnectError, EnvPool, environment_factory

from ..envs import BOOT, PenaltyToolsEnv
from ..helpers_sync import until
from ..leaks import alive, servers_in

ENVS = Path(__file__).resolve().parent.parent / "openenv_envs"
SPAWN = multiprocessing.get_context("spawn")


def _in_child(work: Any, *args: Any) -> None:
    """A spawned child's target: run ``work(*args)`` to completion."""
    run_to_completion(functools.partial(work, *args))


def _spawn(work: Any, *args: Any) -> tuple[Any, Connection]:
    here, there = SPAWN.Pipe()
    child = SPAWN.Process(target=_in_child, args=(work, *args, there), daemon=True)
    child.start()
    there.close()
    return child, here


def _recv(conn: Connection, child: Any) -> Any:
    """The child's next message (its exception, raised here, if it sent one)."""
    assert conn.poll(BOOT), f"the child (exit code {child.exitcode}) said nothing"
    message = conn.recv()
    if isinstance(message, BaseException):
        raise message
    return message


def _use_the_classes(factories: dict[str, Any], conn: Connection) -> None:
    try:
        tools = factories["tools"]
        env = tools()
        text = env.reset(prompt="ignored", seed=1)
        added = env.add(1, 2)
        failed = env.fail("bad")
        reward = env.get_reward()
        again = factories["again"]()  # the same class, pickled twice in the dict: one class here
        again.reset()
        conn.send(
            {
                "pid": os.getpid(),
                "name": tools.__name__,
                "same": factories["again"] is tools,
                "text": text,
                "added": added,
                "failed": failed,
                "reward": reward,
                "sessions": len(tools._openenv.instances),
            }
        )
        tools.close()
    except BaseException as exc:  # to the parent, which raises it
        conn.send(exc)


def test_a_class_and_a_dict_of_them_pickle_into_a_spawned_child(server_factory: Any) -> None:
    server = server_factory(PenaltyToolsEnv, max_sessions=4)
    cls = environment_factory(server.url, name="Calc")
    try:
        assert pickle.loads(pickle.dumps(cls)) is cls  # in the process that made it: the class itself
        child, conn = _spawn(_use_the_classes, {"tools": cls, "again": cls})
        try:
            seen = _recv(conn, child)
        finally:
            child.join(BOOT)
        assert child.exitcode == 0
        assert seen["pid"] != os.getpid() and seen["name"] == "Calc" and seen["same"]
        assert seen["text"] == "\n\nCall add(a, b). Failed calls cost 1.0."
        assert seen["added"] == "3" and seen["failed"].startswith("Error: ")
        assert seen["reward"] == -0.5  # 0.5 for add, the failed call's -1.0 penalty counted
        assert seen["sessions"] == 2
        until(lambda: server.active_sessions == 0)  # the child's sessions ended with it
        env = cls()  # the parent's class is untouched
        env.reset()
        assert env.add(2, 2) == "4"
    finally:
        cls.close()


def _start_a_server_and_wait(factory: Any, conn: Connection) -> None:
    try:
        env = factory()
        text = env.reset()
        pid = (env.env.step({"message": "whose?"})).observation["server_pid"]  # solo_echo says
        conn.send({"text": text, "server_pid": pid, "base_url": factory.base_url})
        conn.recv()  # until the parent says, or kills this process
        factory.close()
        conn.send(alive(pid))
    except BaseException as exc:
        conn.send(exc)


@pytest.mark.parametrize("ending", ["close", "sigterm", "sigkill"])
def test_a_class_that_starts_its_servers_starts_its_own_in_the_child(
    ending: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkout (or image) class: the child starts servers of its own, and they end with the child."""
    checkout = tmp_path / "solo_echo"
    shutil.copytree(ENVS / "solo_echo", checkout)
    monkeypatch.setenv("PATH", str(tmp_path / "no-uv-here"))  # the current interpreter runs it (the child too)
    cls = environment_factory(str(checkout), ready_timeout=BOOT, capacity_timeout=BOOT)
    try:
        (ours,) = servers_in(checkout)  # the server the class started to learn the schema
        child, conn = _spawn(_start_a_server_and_wait, cls)
        try:
            seen = _recv(conn, child)
            assert "ready" in seen["text"]
            theirs = seen["server_pid"]
            assert theirs != ours and alive(theirs)
            if ending == "close":
                conn.send("close")
                assert _recv(conn, child) is False  # the child's class stopped its server
            else:  # no cleanup runs in the child (Python's default SIGTERM too): the reaper's turn
                os.kill(child.pid, signal.SIGTERM if ending == "sigterm" else signal.SIGKILL)
        finally:
            child.join(BOOT)
        until(lambda: not alive(theirs), timeout=BOOT)
        assert alive(ours)  # the parent's server is the parent's
    finally:
        cls.close()
    assert not alive(ours)


def _reset_once(factory: Any, conn: Connection) -> None:
    try:
        factory().reset()
        conn.send(None)
    except BaseException as exc:
        conn.send(exc)


def test_an_unpickled_class_whose_server_is_gone_says_so(server_factory: Any) -> None:
    server = server_factory(PenaltyToolsEnv, max_sessions=2)
    cls = environment_factory(server.url, capacity_timeout=0)
    try:
        server.stop()
        child, conn = _spawn(_reset_once, cls)
        try:
            with pytest.raises(ConnectError, match=r"was unpickled here from process \d+: it reaches the same server"):
                _recv(conn, child)
        finally:
            child.join(BOOT)
    finally:
        cls.close()


def test_what_a_class_pickles_never_shows_its_secrets(server_factory: Any) -> None:
    server = server_factory(PenaltyToolsEnv, max_sessions=4)
    cls = environment_factory(server.url, headers={"Authorization": "Bearer s3cret-token"})
    try:
        reduced: Any = copyreg.dispatch_table[type(cls)](cls)  # what pickle writes for the class
        recipe = reduced[1][0]
        assert "s3cret" in str(recipe.options) and "s3cret" not in repr(recipe)
    finally:
        cls.close()


def _shout(result: Any) -> str:
    return str(result).upper()


def test_what_does_not_pickle_says_what_to_do(server_factory: Any) -> None:
    server = server_factory(PenaltyToolsEnv, max_sessions=4)
    with EnvPool(server.url, size=1) as pool:
        pooled = environment_factory(pool)
        try:
            with pytest.raises(TypeError, match="EnvPool of this process.*from the server's URL"):
                pickle.dumps(pooled)
        finally:
            pooled.close()
    lambdas = environment_factory(server.url, render=lambda result: "x")
    functions = environment_factory(server.url, render=_shout)
    try:
        with pytest.raises(TypeError, match="render=.*top level of a module"):
            pickle.dumps(lambdas)
        again = pickle.loads(pickle.dumps({"f": functions}))["f"]
        assert again is functions
    finally:
        lambdas.close()
        functions.close()


class _SandboxProvider:
    """An OpenEnv RuntimeProvider (start, wait_for_ready, stop) whose server runs already: a cloud sandbox."""

    def __init__(self, url: str) -> None:
        self.url = url

    def start(self, port: int | None = None, env_vars: Any = None) -> str:
        return self.url

    def wait_for_ready(self, timeout_s: float = 30.0) -> None:
        return None

    def stop(self) -> None:
        return None


def _reset_and_show(factory: Any, conn: Connection) -> None:
    try:
        env = factory()
        text = env.reset()
        conn.send({"text": text, "repr": repr(env), "doc": factory.__doc__, "grows": factory._openenv.servers.grows})
        factory.close()
    except BaseException as exc:
        conn.send(exc)


def test_a_provider_class_reaches_the_providers_server_in_the_child_and_keeps_its_url_hidden(
    server_factory: Any,
) -> None:
    """``provider=``: the child connects to the server the provider started (it cannot start one), URL hidden."""
    server = server_factory(PenaltyToolsEnv, max_sessions=4)
    port = server.url.rstrip("/").rpartition(":")[2]
    cls = environment_factory("no-such-image-here", provider=_SandboxProvider(server.url), name="Sandboxed")
    try:
        assert "_SandboxProvider URL hidden" in repr(cls())
        child, conn = _spawn(_reset_and_show, cls)
        try:
            seen = _recv(conn, child)
        finally:
            child.join(BOOT)
        assert seen["text"] == "\n\nCall add(a, b). Failed calls cost 1.0."
        assert not seen["grows"]  # like the parent's class: a provider serves one server
        for shown in (seen["repr"], seen["doc"]):
            assert "_SandboxProvider URL hidden" in shown and port not in shown
    finally:
        cls.close()

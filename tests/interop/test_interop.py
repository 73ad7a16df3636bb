"""Interoperability with the released OpenEnv packages (``nox -s interop``).

* our clients (``openenv.sync.Env`` and ``openenv.aio.Env``, generic, typed and
  typed-from-schema) against the released 0.10.0 and 0.3.0 servers;
* the released clients (driven in their own venvs by ``driver.py``) against our
  server, compared with the same clients against their own server.

Version differences are asserted explicitly, never papered over.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import pytest

import openenv.aio
import openenv.sync
from openenv.sync import (
    CapacityReached,
    Codec,
    ExecutionError,
    InvalidAction,
    ServerValidationError,
    ToolError,
    ToolNotFound,
)

from .conftest import VERSIONS, Servers, record, server_group
from .our_apps import CounterAction, CounterObservation, CounterState

pytestmark = pytest.mark.interop

FLAVOURS = {"sync": openenv.sync.Env, "aio": openenv.aio.Env}
TYPED = Codec(action=CounterAction, observation=CounterObservation, state=CounterState)


async def _(value: Any) -> Any:
    """Await on the asyncio flavour, pass through on the blocking one."""
    return await value if inspect.isawaitable(value) else value


def _error(outcome: Any) -> str:
    """The ``"<Type>: <message>"`` that driver.py recorded for a failed operation (fails if it did not fail)."""
    assert isinstance(outcome, dict) and isinstance(outcome.get("error"), str), f"expected an error, got {outcome!r}"
    return str(outcome["error"])


def _obs(result: Any, key: str) -> Any:
    observation = result.observation
    return observation[key] if isinstance(observation, dict) else getattr(observation, key)


@server_group("counter")
@pytest.mark.parametrize("typing", ["generic", "typed", "schema"])
@pytest.mark.parametrize("flavour", list(FLAVOURS))
@pytest.mark.parametrize("version", VERSIONS)
async def test_our_client_against_released_server(servers: Servers, version: str, flavour: str, typing: str) -> None:
    url = servers.released(version, "counter_app", capacity=2)
    Env: Any = FLAVOURS[flavour]
    client = f"ours/{flavour}/{typing}"
    server = f"openenv {version}"
    if typing == "schema":
        env = await _(Env.from_schema(url))
    else:
        env = await _(Env(url, codec=TYPED if typing == "typed" else None).connect())
    try:
        result = await _(env.reset(seed=3, start=2, bogus=1))
        assert (_obs(result, "count"), _obs(result, "note")) == (2, "seed=3")
        # 0.10 sends metadata (nested and top level); 0.3.0 strips it: StepResult.metadata is {} then
        expected_meta = {"reset": True} if version == "0.10.0" else {}
        assert result.metadata == expected_meta
        record(client, server, "reset(**kwargs)", "ok", "metadata absent" if not expected_meta else "")
        result = await _(env.step({"delta": 1}))
        assert (_obs(result, "count"), result.reward, result.done) == (3, 1.0, False)
        assert result.metadata == ({"step": 1} if version == "0.10.0" else {})
        record(client, server, "step")
        state = await _(env.state())
        total = state["total"] if isinstance(state, dict) else state.total
        step_count = state["step_count"] if isinstance(state, dict) else state.step_count
        assert (step_count, total) == (1, 3)
        record(client, server, "state")
        if typing == "generic":
            with pytest.raises(ServerValidationError) as info:
                await _(env.step({"delta": 1000}))
            assert info.value.errors[0]["loc"] == ["delta"]
            record(client, server, "validation error")
        else:  # typed clients refuse it before sending
            with pytest.raises(InvalidAction) as caught:
                await _(env.step({"delta": 1000}))
            assert type(caught.value) is InvalidAction  # the shared class, whichever flavour raised it
            record(client, server, "validation error", "ok", "refused client-side")
        with pytest.raises(ExecutionError, match="boom: delta 99 is cursed"):
            await _(env.step({"delta": 99}))
        record(client, server, "execution error")
        child = await _(env.new_session())
        assert _obs(await _(child.step({"delta": 2})), "count") == 2
        record(client, server, "new_session")
        third = Env(url)
        with pytest.raises(CapacityReached) as cap:
            await _(third.reset())
        assert (cap.value.active_sessions, cap.value.max_sessions) == (2, 2)
        await _(third.close())
        record(client, server, "capacity refusal")
    finally:
        await _(env.close())
    record(client, server, "close")


@server_group("tools")
@pytest.mark.parametrize("mode", ["simulation", "production"])
@pytest.mark.parametrize("flavour", list(FLAVOURS))
@pytest.mark.parametrize("version", VERSIONS)
async def test_our_mcp_against_released_server(servers: Servers, version: str, flavour: str, mode: str) -> None:
    # production mode at capacity 1 is the attach hazard: a 0.3.0 server ignores
    # ``/ws?session_id=``, so an HTTP-created session would hold the only slot and the
    # WebSocket would get CAPACITY_REACHED (OpenEnv 0.10's own client fails so)
    capacity = 1 if mode == "production" else 2
    url = servers.released(version, "tools_app", capacity=capacity)
    Env: Any = FLAVOURS[flavour]
    client, server = f"ours/{flavour}/mcp-{mode}", f"openenv {version}"
    env = await _(Env(url, mode=mode).connect())
    try:
        await _(env.reset())
        names = sorted(t.name for t in await _(env.list_tools()))
        assert names == ["add", "fail", "greet"]
        assert (await _(env.get_tool("add"))).input_schema["required"] == ["a", "b"]
        record(client, server, "list_tools/get_tool")
        assert (await _(env.call_tool("add", a=2, b=40))).data == 42
        assert (await _(env.call_tool("greet", name="Ada"))).data == "Hello, Ada!"
        record(client, server, "call_tool")
        with pytest.raises(ToolError) as info:
            await _(env.call_tool("fail", message="bad"))
        assert info.value.code == -32603 and "bad" in info.value.message
        with pytest.raises(ToolNotFound):
            await _(env.call_tool("nope"))
        record(client, server, "tool errors")
        state = await _(env.state())
        assert state["step_count"] == 0  # the released MCPEnvironment does not count step-loop tool calls
        if mode == "production":
            attached = env._mcp.attach
            assert attached is (version == "0.10.0")
            record(
                client,
                server,
                "session attach",
                "ok",
                "attached" if attached else "0.3.0 ignores ?session_id=: one WS session used",
            )
    finally:
        await _(env.close())


COUNTER_FIELDS = [
    "reset",
    "step",
    "state",
    "validation_error",
    "execution_error",
    "state_after_errors",
    "capacity",
    "close",
]


@server_group("counter")
@pytest.mark.parametrize("transport", ["embedded", "asgi"])
@pytest.mark.parametrize(
    "version,flavour",
    [("0.10.0", "async"), ("0.10.0", "plain"), ("0.10.0", "sync"), ("0.3.0", "sync"), ("0.3.0", "async")],
)
def test_released_client_against_our_server(
    driven: Callable[[str, str, str], dict[str, Any]], version: str, flavour: str, transport: str
) -> None:
    # one released-client run drove their server and both of ours (driver.py, fresh clients per URL)
    run = driven(version, flavour, "counter")
    theirs, ours = run["theirs"], run[transport]
    asgi = transport == "asgi"
    client, server = f"openenv {version} {flavour}", "ours" + ("/asgi" if asgi else "")
    for key in COUNTER_FIELDS + (["new_session_step"] if "new_session_step" in theirs else []):
        ok = theirs.get(key) == ours.get(key)
        if version == "0.3.0" and key in ("reset", "step", "new_session_step") and not ok:
            # 0.3.0 servers strip metadata; ours always sends it (0.10 flavour) and the
            # 0.3.0 client ignores it: compare without it
            def strip(r: dict[str, Any]) -> dict[str, Any]:
                return {**r, "observation": {k: v for k, v in r["observation"].items() if k != "metadata"}}

            ok = strip(theirs[key]) == strip(ours[key])
            if ok:
                record(client, server, key, "ok", "metadata only on ours")
                continue
        if key == "capacity" and not ok:
            # both refuse the third session, each server its own way: ours answers the handshake with
            # HTTP 503 (CAPACITY_REACHED before the upgrade); the released server sends a
            # CAPACITY_REACHED frame, or closes before the client's first send lands (timing), so
            # the released client reports ConnectionClosedOK instead
            assert _error(ours[key]).startswith("ConnectionError: ") and "HTTP 503" in _error(ours[key]), ours[key]
            refusal = _error(theirs[key])
            assert "(code: CAPACITY_REACHED)" in refusal or refusal.startswith("ConnectionClosedOK: "), refusal
            record(client, server, key, "ok", f"theirs: {refusal[:40]}")
            continue
        assert ok, (key, theirs.get(key), ours.get(key))
        record(client, server, key)


@server_group("tools")
@pytest.mark.parametrize("transport", ["embedded", "asgi"])
@pytest.mark.parametrize("version,flavour", [("0.3.0", "sync"), ("0.3.0", "async"), ("0.10.0", "async")])
def test_released_mcp_client_against_our_server(
    driven: Callable[[str, str, str], dict[str, Any]], version: str, flavour: str, transport: str
) -> None:
    run = driven(version, flavour, "tools")
    theirs, ours = run["theirs"], run[transport]
    asgi = transport == "asgi"
    client, server = f"openenv {version} MCPToolClient {flavour}", "ours" + ("/asgi" if asgi else "")
    assert theirs["list_tools"] == ["add", "fail", "greet"]
    if version == "0.10.0" and not asgi:
        # the 0.10 MCPToolClient always uses POST /mcp, which our embedded server answers 501
        refused = _error(ours["connect"])
        assert refused.startswith("HTTPStatusError: Server error '501 Not Implemented'") and "/mcp'" in refused, refused
        record(client, server, "list_tools/call_tool", "n/a", "needs POST /mcp (not served)")
        return
    for key in ("list_tools", "add"):
        assert theirs[key] == ours[key], (key, theirs[key], ours[key])
        record(client, server, key)
    # the same released client reports the tool's failure the same way against both servers
    theirs_fail, ours_fail = _error(theirs["fail"]), _error(ours["fail"])
    assert "bad" in theirs_fail and "bad" in ours_fail, (theirs_fail, ours_fail)
    assert theirs_fail.split(":", 1)[0] == ours_fail.split(":", 1)[0], (theirs_fail, ours_fail)
    record(client, server, "tool error")


@server_group("cli-capacity")
@pytest.mark.parametrize("version", VERSIONS)
def test_the_command_line_waits_for_a_released_one_session_server(
    servers: Servers, capsys: pytest.CaptureFixture[str], version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A released server at ``MAX_CONCURRENT_ENVS=1`` accepts the connection, then refuses the first call:
    ``openenv run`` retries that call on the same client until the holder's session is freed."""
    from openenv._cli import main

    from ..test_cli import release_when_the_wait_starts

    url = servers.released(version, "counter_app", capacity=1)
    holder = openenv.sync.Env(url)
    holder.reset()
    try:
        with release_when_the_wait_starts(monkeypatch, holder.close):  # not a fixed delay: load varies
            code = main(["run", url, "--action", '{"delta": 2}', "--json"])
    finally:
        holder.close()
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "the server is at capacity (" in captured.err and "--capacity-timeout" in captured.err
    records = [json.loads(line) for line in captured.out.splitlines()]
    assert [r["type"] for r in records] == ["reset", "step"]
    assert records[1]["observation"]["count"] == 2
    record("openenv run", f"openenv {version}", "capacity wait", "ok", "refused on the first call, retried")

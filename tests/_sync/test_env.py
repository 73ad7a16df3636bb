# GENERATED from tests/_async/test_env.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Behaviour of ``Env`` against real servers on 127.0.0.1 (written once, generated for the sync twin)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from openenv.sync import (
    CapacityReached,
    Codec,
    ConnectError,
    Env,
    EnvClosed,
    ExecutionError,
    InvalidAction,
    InvalidURL,
    MessageTimeout,
    MessageTooLarge,
    OpenEnvError,
    ProtocolError,
    ServerError,
    ServerValidationError,
    SessionBusy,
    SessionLost,
    State,
    StepResult,
)
from openenv.server.echo import EchoAction, EchoObservation, EchoState

from ..envs import IN_TIME, TOO_LATE, CounterEnv, reply_ok
from ..helpers_sync import gather, sleep, until

ECHO = Codec(action=EchoAction, observation=EchoObservation, state=EchoState)


def test_reset_step_state_generic(echo_server: Any) -> None:
    with Env(echo_server.url) as env:
        result = env.reset()
        assert isinstance(result, StepResult)
        assert result.observation["echoed_message"] == "Echo environment ready!"
        assert result.done is False
        result = env.step({"message": "hi"})
        assert result.observation == {"echoed_message": "hi", "message_length": 2, "metadata": {"step": 1}}
        assert result.reward == pytest.approx(0.2)
        assert result.done is False
        assert result.metadata == {"step": 1}
        state = env.state()
        assert state["step_count"] == 1
        assert isinstance(state["episode_id"], str)


def test_base_url_is_normalised_and_read_only(echo_server: Any) -> None:
    env = Env(echo_server.url + "/")
    assert env.base_url == echo_server.url
    with pytest.raises(AttributeError):
        env.base_url = "http://elsewhere"  # type: ignore[misc]
    env.close()


def test_ws_urls_work(echo_server: Any) -> None:
    ws_url = echo_server.url.replace("http://", "WS://") + "/ws/"
    with Env(ws_url) as env:
        assert env.base_url == echo_server.url.replace("http://", "ws://")
        result = env.reset()
        assert result.observation["message_length"] == 0


def test_typed_codec(echo_server: Any) -> None:
    with Env(echo_server.url, codec=ECHO) as env:
        result = env.reset()
        assert isinstance(result.observation, EchoObservation)
        result = env.step(EchoAction(message="hey"))
        assert isinstance(result.observation, EchoObservation)
        assert result.observation.echoed_message == "hey"
        assert result.observation.reward == pytest.approx(0.3)
        assert result.observation.done is False
        assert result.observation.metadata == {"step": 1}
        state = env.state()
        assert isinstance(state, EchoState)
        assert state.step_count == 1


def test_typed_codec_validates_before_sending(echo_server: Any) -> None:
    with Env(echo_server.url, codec=ECHO) as env:
        env.reset()
        with pytest.raises(InvalidAction) as info:
            env.step({"mesage": "typo"})
        assert {e["loc"][0] for e in info.value.errors} == {"message", "mesage"}
        result = env.step({"message": "ok"})
        assert result.observation.echoed_message == "ok"
        assert (env.state()).step_count == 1


def test_an_action_that_is_no_unicode_is_refused_and_the_episode_kept(echo_server: Any) -> None:
    """A lone surrogate would pass JSON encoding and break websockets' UTF-8 send, dropping the episode."""
    with Env(echo_server.url) as env:
        env.reset()
        assert (env.step({"message": "one"})).observation["echoed_message"] == "one"
        with pytest.raises(InvalidAction, match="a lone surrogate"):
            env.step({"message": "bad \udcff bytes"})
        result = env.step({"message": "still here ✓"})
        assert result.observation["echoed_message"] == "still here ✓"
        assert (env.state())["step_count"] == 2


class PortedEchoEnv(Env[EchoAction, EchoObservation, State]):
    """A typed client ported from OpenEnv: only its hooks, no codec."""

    def _step_payload(self, action: EchoAction) -> dict[str, Any]:
        return {"message": action.message.upper()}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[EchoObservation]:
        obs = EchoObservation(**payload["observation"])
        return StepResult(observation=obs, reward=payload.get("reward"), done=payload["done"])

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(**payload)


def test_openenv_hook_names_work(echo_server: Any) -> None:
    with PortedEchoEnv(echo_server.url) as env:
        env.reset()
        result = env.step(EchoAction(message="loud"))
        assert result.observation.echoed_message == "LOUD"
        assert isinstance(env.state(), State)
        child = env.new_session()
        assert isinstance(child, PortedEchoEnv)
        assert (child.step(EchoAction(message="x"))).observation.echoed_message == "X"


def test_reset_kwargs_reach_the_environment(counter_server: Any) -> None:
    with Env(counter_server.url) as env:
        result = env.reset(seed=7, episode_id="e1", start=2, bogus=1)
        assert result.observation["count"] == 2
        assert result.observation["note"] == "seed=7"
        assert result.metadata == {"reset": True}
        state = env.state()
        assert state["episode_id"] == "e1"
        assert state["total"] == 2


def test_empty_metadata_is_an_empty_dict(counter_server: Any) -> None:
    with Env(counter_server.url) as env:
        env.reset()
        result = env.step({"delta": 0})
        assert result.metadata == {}
        assert result.reward == 0.0
        result = env.step({"delta": 3})
        assert result.metadata == {"step": 2}
        assert result.reward == 3.0 and isinstance(result.reward, float)


def test_validation_error_keeps_the_session(counter_server: Any) -> None:
    with Env(counter_server.url) as env:
        env.reset()
        env.step({"delta": 1})
        with pytest.raises(ServerValidationError) as info:
            env.step({"delta": 1000})
        assert info.value.code == "VALIDATION_ERROR"
        assert info.value.errors[0]["loc"] == ["delta"]
        assert "delta" in str(info.value)
        with pytest.raises(ServerValidationError) as info:
            env.step({"delta": 1, "extra": True})
        assert info.value.errors[0]["loc"] == ["extra"]
        assert (env.step({"delta": 1})).observation["count"] == 2


def test_execution_error_keeps_the_session(counter_server: Any) -> None:
    with Env(counter_server.url) as env:
        env.reset()
        env.step({"delta": 2})
        with pytest.raises(ExecutionError) as info:
            env.step({"delta": 99})
        assert info.value.code == "EXECUTION_ERROR"
        assert info.value.message == "boom: delta 99 is cursed"
        assert isinstance(info.value, ServerError) and isinstance(info.value, OpenEnvError)
        assert (env.state())["total"] == 2


def test_capacity_refusal(server_factory: Any) -> None:
    server = server_factory(CounterEnv, max_sessions=1)
    first = Env(server.url)
    first.reset()
    second = Env(server.url)
    with pytest.raises(CapacityReached) as info:
        second.reset()
    assert info.value.active_sessions == 1
    assert info.value.max_sessions == 1
    assert "capacity" in str(info.value)
    first.close()
    until(lambda: server.active_sessions == 0)  # the server frees the slot once it sees the disconnect
    assert (second.reset(start=4)).observation["count"] == 4
    second.close()


def test_capacity_refused_at_connect(server_factory: Any) -> None:
    """The server refuses before the WebSocket handshake (HTTP 503 carrying CAPACITY_REACHED)."""
    server = server_factory(CounterEnv, max_sessions=1)
    with Env(server.url) as first:
        first.connect()
        second = Env(server.url)
        with pytest.raises(CapacityReached) as info:
            second.connect()
        assert (info.value.active_sessions, info.value.max_sessions) == (1, 1)
        assert info.value.code == "CAPACITY_REACHED"
        assert not second.connected
        second.close()
        assert (first.reset(start=2)).observation["count"] == 2


def test_idle_timeout_loses_the_episode_then_reset_recovers(server_factory: Any) -> None:
    server = server_factory(CounterEnv, max_sessions=1, idle_timeout=IN_TIME)
    with Env(server.url) as env:
        env.reset(start=1)
        until(lambda: server.active_sessions == 0)  # the server closed the idle session (1001)
        with pytest.raises(SessionLost, match="idle timeout"):
            env.step({"delta": 1})
        assert (env.reset(start=5)).observation["count"] == 5  # reconnects into the freed slot
        assert (env.step({"delta": 1})).observation["count"] == 6


def test_message_timeout_loses_the_episode(counter_server: Any) -> None:
    with Env(counter_server.url, message_timeout=IN_TIME) as env:
        env.reset(start=1)
        with pytest.raises(MessageTimeout) as info:
            env.step({"delta": 1, "sleep": TOO_LATE})
        assert isinstance(info.value, TimeoutError)
        assert isinstance(info.value, SessionLost)
        assert not env.connected
        with pytest.raises(SessionLost, match="reset"):
            env.step({"delta": 1})
        with pytest.raises(SessionLost):
            env.state()
        result = env.reset(start=5)  # reconnects: a new episode
        assert result.observation["count"] == 5
        assert (env.step({"delta": 1})).observation["count"] == 6


def test_timeout_before_any_episode_reconnects_quietly(counter_server: Any) -> None:
    with Env(counter_server.url, message_timeout=IN_TIME) as env:
        with pytest.raises(MessageTimeout):
            env.step({"delta": 1, "sleep": TOO_LATE})
        state = env.state()  # nothing was lost: a fresh session answers
        assert state["step_count"] == 0


def test_server_restart_mid_episode(server_factory: Any) -> None:
    server = server_factory(CounterEnv, max_sessions=4)
    port = server.port
    env = Env(server.url)
    env.reset(start=3)
    env.step({"delta": 1})
    server.stop()
    server_factory(CounterEnv, max_sessions=4, port=port)
    with pytest.raises(SessionLost, match="episode"):
        env.step({"delta": 1})
    with pytest.raises(SessionLost):
        env.step({"delta": 1})
    result = env.reset(start=7)
    assert result.observation["count"] == 7
    env.close()


def test_server_restart_before_reset_is_transparent(server_factory: Any) -> None:
    server = server_factory(CounterEnv, max_sessions=4)
    port = server.port
    env = Env(server.url).connect()
    server.stop()
    server_factory(CounterEnv, max_sessions=4, port=port)
    result = env.reset(start=2)
    assert result.observation["count"] == 2
    env.close()


def test_concurrent_calls_on_one_session_are_refused(counter_server: Any) -> None:
    with Env(counter_server.url) as env:
        env.reset()
        first, second = gather(
            lambda: env.step({"delta": 1, "sleep": TOO_LATE}),  # still running when the second call comes
            lambda: env.step({"delta": 1}),
            stagger=0.5,
        )
        assert isinstance(first, StepResult)
        assert isinstance(second, SessionBusy)
        state = env.state()
        assert state["step_count"] == 1  # the socket stayed in step


def test_sessions_are_independent(counter_server: Any) -> None:
    with Env(counter_server.url) as env:
        env.reset(start=1)
        child = env.new_session()
        child.reset(start=100)
        child.step({"delta": 5})
        assert (env.state())["total"] == 1
        assert (child.state())["total"] == 105
    assert child.closed
    with pytest.raises(EnvClosed):
        child.state()


def test_close_is_idempotent_and_final(echo_server: Any) -> None:
    env = Env(echo_server.url)
    env.reset()
    env.close()
    env.close()
    assert env.closed and not env.connected
    with pytest.raises(EnvClosed, match="closed"):
        env.reset()
    with pytest.raises(EnvClosed):
        env.connect()


def test_disconnect_then_reconnect(counter_server: Any) -> None:
    env = Env(counter_server.url)
    env.reset(start=3)
    env.disconnect()
    assert not env.connected
    result = env.reset(start=4)
    assert result.observation["count"] == 4
    env.close()


def test_step_keyword_arguments_are_refused(echo_server: Any) -> None:
    with Env(echo_server.url) as env:
        env.reset()
        with pytest.raises(TypeError, match="timeout_s"):
            env.step({"message": "x"}, timeout_s=1)


@pytest.mark.parametrize("url", ["", "   ", "ftp://host", "http://", "http://host:99999", "http://[::1"])
def test_bad_urls_raise_invalid_url(url: str) -> None:
    with pytest.raises(InvalidURL):
        Env(url)


def test_bad_options_raise(echo_server: Any) -> None:
    with pytest.raises(ValueError, match="message_timeout"):
        Env(echo_server.url, message_timeout=0)
    with pytest.raises(ValueError, match="max_message_size"):
        Env(echo_server.url, max_message_size=-1)


def test_connection_refused(free_port: int) -> None:
    env = Env(f"http://127.0.0.1:{free_port}")
    with pytest.raises(ConnectError, match="refused"):
        env.reset()
    env.close()


def test_not_an_openenv_endpoint(echo_server: Any) -> None:
    env = Env(echo_server.url + "/not-here")
    with pytest.raises(ConnectError, match="HTTP"):
        env.connect()
    env.close()


def test_non_json_reply_is_a_protocol_error(script_server: Any) -> None:
    server = script_server(lambda frame: "this is not json")
    with Env(server.url) as env:
        with pytest.raises(ProtocolError, match="not JSON"):
            env.reset()
        assert not env.connected


def test_binary_reply_is_a_protocol_error(script_server: Any) -> None:
    server = script_server(lambda frame: b"\x00\x01")
    with Env(server.url) as env:
        with pytest.raises(ProtocolError, match="binary"):
            env.state()


def test_wrong_reply_type_is_never_returned(script_server: Any) -> None:
    state_frame = json.dumps({"type": "state", "data": {"step_count": 0}})
    server = script_server(lambda frame: state_frame)
    with Env(server.url) as env:
        with pytest.raises(ProtocolError, match="expected a 'observation' reply"):
            env.reset()


def test_unknown_error_code_is_a_server_error(script_server: Any) -> None:
    frame = json.dumps({"type": "error", "data": {"message": "odd", "code": "NEW_CODE", "extra": 1}})
    server = script_server(lambda _: frame)
    with Env(server.url) as env:
        with pytest.raises(ServerError) as info:
            env.state()
        assert (info.value.code, info.value.message, info.value.details) == ("NEW_CODE", "odd", {"extra": 1})


def test_oversized_reply_is_refused(counter_server: Any) -> None:
    with Env(counter_server.url, max_message_size=100_000) as env:
        env.reset()
        with pytest.raises(MessageTooLarge, match="max_message_size"):
            env.step({"delta": 1, "size": 200_000})
        with pytest.raises(SessionLost):
            env.step({"delta": 1})
        assert (env.reset()).observation["count"] == 0


def test_oversized_action_is_refused_by_the_server(server_factory: Any) -> None:
    server = server_factory(CounterEnv, max_message_size=50_000)
    with Env(server.url) as env:
        env.reset()
        with pytest.raises(MessageTooLarge, match="too large"):
            env.step({"delta": 1, "metadata": {"pad": "x" * 100_000}})


def test_large_observation_round_trip(counter_server: Any) -> None:
    with Env(counter_server.url) as env:
        env.reset()
        result = env.step({"delta": 1, "size": 1_000_000})
        assert len(result.observation["blob"]) == 1_000_000


def test_headers_are_sent_but_never_shown(script_server: Any) -> None:
    server = script_server(reply_ok)
    env = Env(server.url, headers={"Authorization": "Bearer SECRET-TOKEN"})
    with env:
        env.state()
        assert server.headers[-1]["Authorization"] == "Bearer SECRET-TOKEN"
        assert "SECRET" not in repr(env)
        assert "SECRET" not in repr(env.options)


def test_credentials_in_the_url_are_not_shown(echo_server: Any) -> None:
    url = echo_server.url.replace("http://", "http://user:hunter2@")
    env = Env(url)
    assert "hunter2" not in repr(env)
    env.close()


def test_compression_is_off_on_loopback_by_default(script_server: Any) -> None:
    server = script_server(reply_ok)
    with Env(server.url) as env:
        env.state()
    assert "permessage-deflate" not in server.headers[-1].get("Sec-WebSocket-Extensions", "")
    with Env(server.url, compression=True) as env:
        env.state()
    assert "permessage-deflate" in server.headers[-1].get("Sec-WebSocket-Extensions", "")


def test_message_timeout_is_per_reply_not_per_session(counter_server: Any) -> None:
    with Env(counter_server.url, message_timeout=IN_TIME) as env:
        env.reset()
        sleep(IN_TIME + 0.5)  # idle longer than the timeout: nothing to time out
        for _ in range(4):  # together longer than the timeout, each reply in time
            env.step({"delta": 1, "sleep": IN_TIME / 3})
        assert (env.state())["total"] == 4
        with pytest.raises(MessageTimeout):
            env.step({"delta": 1, "sleep": TOO_LATE})


def test_close_during_a_call_ends_it_and_never_reconnects(counter_server: Any) -> None:
    env = Env(counter_server.url).connect()
    stepped, closed = gather(lambda: env.step({"delta": 1, "sleep": TOO_LATE}), env.close)
    assert isinstance(stepped, SessionLost)
    assert closed is None
    assert env.closed and not env.connected
    with pytest.raises(EnvClosed):
        env.state()


def test_closing_a_parent_closes_every_child(counter_server: Any) -> None:
    env = Env(counter_server.url).connect()
    children = [env.new_session() for _ in range(3)]
    env.close()
    assert all(child.closed and not child.connected for child in children)


def test_new_session_is_a_fresh_instance_not_a_copy(counter_server: Any) -> None:
    class Recording(Env):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.seen: list[Any] = []

    with Recording(counter_server.url, message_timeout=7.0, headers={"X-Trace": "t"}) as env:
        child = env.new_session()
        assert type(child) is Recording and child.seen is not env.seen  # no shared mutable state
        assert child.options == env.options and child.base_url == env.base_url and child.mode == env.mode
        assert child.codec is env.codec
        child.reset(start=3)
        assert (child.state())["total"] == 3


def test_a_dropped_client_frees_its_server_session(server_factory: Any, caplog: Any) -> None:
    """An ``Env`` garbage-collected while connected (a notebook cell run again) gives its session back.

    Without it, the socket's own reader (a thread, or the event loop's task) keeps the connection, and
    a one-session server's only slot, until the program exits.
    """
    import gc
    import logging
    import time

    server = server_factory(CounterEnv, max_sessions=1)
    caplog.set_level(logging.WARNING, logger="openenv")
    for _ in range(2):  # as a cell run twice: the second client needs the first one's slot
        env = Env(server.url)
        assert (env.step({"delta": 1})).observation["count"] == 1
        del env
        gc.collect()
        end = time.monotonic() + 10
        while server.active_sessions:
            assert time.monotonic() < end, "the dropped client's session was never freed"
            sleep(0.02)
    # only this test's clients: the collections may also finalize garbage that earlier tests left
    ours = [r.getMessage() for r in caplog.records if r.name == "openenv" and server.url in r.getMessage()]
    dropped = [m for m in ours if "garbage-collected without close()" in m]
    assert (
        dropped
        == [
            f"an Env connected to {server.url} was garbage-collected without close(): its server session is "
            "dropped; close it (env.close(), or use it in a with block) to end the session cleanly"
        ]
        * 2
    )
    caplog.clear()
    with Env(server.url) as env:  # a closed client says nothing
        env.reset()
    del env
    gc.collect()
    assert not [r for r in caplog.records if r.name == "openenv" and server.url in r.getMessage()]

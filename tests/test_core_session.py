"""The client session's rules, sans-IO: events in, decisions out (no socket, no loop, no server)."""

from __future__ import annotations

import pytest

from openenv._core import frames
from openenv._core.errors import EnvClosed, InvalidActionType, MessageTooLarge, ServerError, SessionLost
from openenv._core.mcp import PRODUCTION, SIMULATION, McpState
from openenv._core.session import (
    Request,
    RequestKind,
    Session,
    attach_plan,
    created,
    release_on_close,
    ws_target,
)

K = RequestKind


def connected(*, episode: bool = False) -> Session:
    s = Session("ws://h/ws")
    s.opening()
    s.opened()
    if episode:
        s.replied(K.RESET)
    return s


def test_kinds_know_their_reply_episode_and_idempotence() -> None:
    assert [k.reply for k in K] == [
        frames.OBSERVATION,
        frames.OBSERVATION,
        frames.STATE,
        frames.MCP,
        frames.OBSERVATION,
    ]
    assert [k for k in K if k.starts_episode] == [K.RESET]
    assert {k for k in K if k.in_episode} == {K.RESET, K.STEP, K.TOOL_STEP}
    assert {k for k in K if k.idempotent} == {K.RESET, K.STATE}
    assert {k for k in K if k.is_step} == {K.STEP, K.TOOL_STEP}
    assert K.TOOL_STEP.label == "step" and K.MCP.label == "mcp"


def test_a_fresh_session_connects_for_any_request() -> None:
    s = Session("ws://h/ws")
    assert not s.connected and not s.episode and s.lost is None
    assert all(s.needs_connection(k) for k in K)
    s.opening()
    s.opened()
    assert not any(s.needs_connection(k) for k in K)


def test_replies_start_and_continue_episodes_but_state_and_mcp_do_not() -> None:
    for kind, running in [(K.STATE, False), (K.MCP, False), (K.STEP, True), (K.TOOL_STEP, True), (K.RESET, True)]:
        s = connected()
        s.replied(kind)
        assert s.episode is running


def test_a_loss_mid_episode_refuses_everything_but_reset_until_it_reconnects() -> None:
    s = connected(episode=True)
    s.lose("the connection closed during step")
    assert not s.connected and not s.episode
    for kind in (K.STEP, K.STATE, K.MCP, K.TOOL_STEP):
        with pytest.raises(SessionLost, match="the connection closed during step, so the episode .* call reset"):
            s.needs_connection(kind)
    assert s.needs_connection(K.RESET)
    s.opening()  # reset (or connect()) reconnects: nothing is lost any more
    assert s.lost is None
    s.opened()
    assert not s.needs_connection(K.STEP)


def test_a_loss_without_an_episode_is_quiet() -> None:
    s = connected()
    s.lose("no reply to state came within message_timeout")
    assert s.lost is None and s.needs_connection(K.STEP)


def test_the_episode_flag_at_send_time_decides() -> None:
    s = connected()
    s.lose("x", had_episode=True)
    assert s.lost == "x"
    s = connected(episode=True)
    s.lose(Session.CLOSED, had_episode=False)
    assert s.lost is None


def test_disconnect_forgets_a_loss() -> None:
    s = connected(episode=True)
    s.lose("gone")
    s.forget_loss()
    assert s.needs_connection(K.STEP)


def test_closed_refuses_everything() -> None:
    s = connected()
    s.closed = True
    with pytest.raises(EnvClosed, match="ws://h/ws is closed; create a new one"):
        s.check_open()


LOST = SessionLost("closed")


@pytest.mark.parametrize(
    ("kind", "sent", "retried"),
    [
        (K.RESET, True, True),
        (K.STATE, True, True),
        (K.STEP, False, True),  # the frame never left
        (K.TOOL_STEP, False, True),
        (K.STEP, True, False),  # it may have been executed: never re-sent
        (K.TOOL_STEP, True, False),
        (K.MCP, True, False),
        (K.MCP, False, False),
    ],
)
def test_retry_once_on_a_stale_socket_before_any_episode(kind: RequestKind, sent: bool, retried: bool) -> None:
    s = connected()
    attempt = s.attempt(kind, 1, reused=True)
    attempt.sent = sent
    assert s.may_retry(attempt, LOST) is retried


def test_never_retry_twice_on_a_new_socket_in_an_episode_after_close_or_for_other_errors() -> None:
    s = connected()
    assert not s.may_retry(s.attempt(K.RESET, 2, reused=True), LOST)
    assert not s.may_retry(s.attempt(K.RESET, 1, reused=False), LOST)
    assert not s.may_retry(s.attempt(K.RESET, 1, reused=True), MessageTooLarge("big"))
    episode = connected(episode=True)
    assert not episode.may_retry(episode.attempt(K.STATE, 1, reused=True), LOST)
    s.closed = True
    assert not s.may_retry(s.attempt(K.STATE, 1, reused=True), LOST)


def test_messages() -> None:
    s = connected(episode=True)
    attempt = s.attempt(K.TOOL_STEP, 1, reused=True)
    assert Session.closed_reason(K.TOOL_STEP) == "the connection closed during step"
    assert Session.timeout_message(attempt, 5.0).endswith("call reset() to start a new one")
    assert "episode" not in Session.timeout_message(connected().attempt(K.STATE, 1, reused=True), 5.0)
    assert Session.interrupted_reason(K.RESET) == "the reset call was interrupted"
    assert Session.protocol_reason(K.MCP) == "the server broke the protocol during mcp"
    fatal = ServerError("x", "SESSION_ERROR")
    fatal.fatal = True
    assert Session.server_error_reason(fatal) == "the server ended the session (SESSION_ERROR)"
    fatal.fatal = False
    assert Session.server_error_reason(fatal) is None


# -- production mode ------------------------------------------------------------------


def test_simulation_opens_the_plain_url() -> None:
    target = ws_target(SIMULATION, McpState(), "ws://h/ws")
    assert not target.create and target.url == "ws://h/ws"


def test_production_creates_then_attaches_then_releases_once() -> None:
    state = McpState()
    assert ws_target(PRODUCTION, state, "ws://h/ws?x=1").create
    created(state, "s1")
    assert ws_target(PRODUCTION, state, "ws://h/ws?x=1").url == "ws://h/ws?x=1&session_id=s1"
    plan = attach_plan(state, "s1")  # the socket serves the HTTP session
    assert plan.ok and not plan.reconnect and plan.release is None
    assert release_on_close(state) == "s1"
    assert release_on_close(state) is None


def test_production_server_that_ignores_attach_uses_the_sockets_session() -> None:
    state = McpState()
    created(state, "s1")
    plan = attach_plan(state, "s2")  # OpenEnv 0.3.0: a second session
    assert not plan.ok and not plan.reconnect and plan.release == "s1"
    assert state.session_id == "s2" and not state.owned and not state.attach
    assert ws_target(PRODUCTION, state, "ws://h/ws").url == "ws://h/ws"  # never attaches again
    assert release_on_close(state) is None  # the socket's session ends with the socket


def test_production_socket_refused_for_capacity_reconnects_without_attaching() -> None:
    state = McpState()
    created(state, "s1")
    plan = attach_plan(state, None)
    assert plan.reconnect and plan.release == "s1" and state.session_id is None
    assert not ws_target(PRODUCTION, state, "ws://h/ws").create


def test_one_builder_makes_every_kind_of_request_without_sending() -> None:
    def parse(data: dict[str, object]) -> int:
        return len(data)

    step = Request(K.STEP, {"message": "hi"}, parse)
    assert (step.kind, step.frame, step.parse) == (K.STEP, '{"type":"step","data":{"message":"hi"}}', parse)
    assert Request(K.RESET, {"seed": 1}, parse).frame == '{"type":"reset","data":{"seed":1}}'
    assert Request(K.RESET, None, parse).frame == '{"type":"reset","data":{}}'
    assert Request(K.STATE, None, parse).frame == frames.STATE_FRAME
    assert Request(K.TOOL_STEP, {"type": "list_tools"}, parse).frame.startswith('{"type":"step"')
    assert Request(K.MCP, {"jsonrpc": "2.0", "id": 1}, parse).frame.startswith('{"type":"mcp"')
    with pytest.raises(InvalidActionType):  # refused while building: nothing would be sent
        Request(K.STEP, {"bad": {1, 2}}, parse)

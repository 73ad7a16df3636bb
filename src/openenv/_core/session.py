"""The client session's decisions, sans-IO (the twins only move frames and ask).

Like websockets' ``protocol.py``: one object holds the state of one client
session (connected, an episode running, lost and why, closed) and answers the
questions the IO code would otherwise answer with string labels and
positional flags:

* **what a request is**: `RequestKind` (its reply type, whether it
  starts or continues an episode, whether it may be re-sent), and `Request`,
  the one request builder (``Env``'s calls and ``EnvPool``'s alike);
* **what may be sent now**: `Session.check_open()` (closed →
  [`EnvClosed`][openenv.sync.EnvClosed]), `Session.needs_connection()` (lost mid-episode →
  [`SessionLost`][openenv.sync.SessionLost] until a reset);
* **what a failure means**: `Session.lose()` and friends record a lost
  episode; `Session.may_retry()` says whether a failed request is sent
  once more on a fresh connection;
* **production-mode attach**: `ws_target()` and `attach_plan()`.

It does no IO, reads no clock and knows nothing of asyncio or threads.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from . import frames
from .errors import EnvClosed, OpenEnvError, ServerError, SessionLost
from .mcp import PRODUCTION, McpState, attach_url

__all__ = ["RequestKind", "Request", "Attempt", "Session", "AttachPlan", "ws_target", "attach_plan"]


class RequestKind(enum.Enum):
    """The kinds of request a client sends on its session WebSocket."""

    RESET = "reset"
    STEP = "step"
    STATE = "state"
    #: a JSON-RPC request in an ``mcp`` frame (``tools/list``); not a step
    MCP = "mcp"
    #: an MCP action (``call_tool``/``list_tools``) sent as a step: a real step
    TOOL_STEP = "tool_step"

    # What each kind is, as plain attributes of its member (set below the class): they are read on
    # every request, and a property is a call each time (bench/README.md, the step section).

    #: how messages name the request (a tool step is a step)
    label: str
    #: the reply frame type it expects
    reply: str
    #: whether it starts a new episode (so it may reconnect after a lost session)
    starts_episode: bool
    #: whether an episode is in progress once it succeeded
    in_episode: bool
    #: whether it is a step (a plain action or an MCP action)
    is_step: bool
    #: whether sending it twice does no harm (a reset starts afresh; state only reads)
    idempotent: bool


_RESET, _STEP, _STATE, _MCP, _TOOL_STEP = (
    RequestKind.RESET,
    RequestKind.STEP,
    RequestKind.STATE,
    RequestKind.MCP,
    RequestKind.TOOL_STEP,
)

for _kind, _label, _reply, _starts, _in_episode, _is_step, _idempotent in (
    (_RESET, "reset", frames.OBSERVATION, True, True, False, True),
    (_STEP, "step", frames.OBSERVATION, False, True, True, False),
    (_STATE, "state", frames.STATE, False, False, False, True),
    (_MCP, "mcp", frames.MCP, False, False, False, False),
    (_TOOL_STEP, "step", frames.OBSERVATION, False, True, True, False),
):
    _kind.label, _kind.reply, _kind.starts_episode = _label, _reply, _starts
    _kind.in_episode, _kind.is_step, _kind.idempotent = _in_episode, _is_step, _idempotent
del _kind, _label, _reply, _starts, _in_episode, _is_step, _idempotent


T = TypeVar("T")


class Request(Generic[T]):
    """One request of a session, built before anything is sent: its kind, its frame and its reply's parser.

    The one request builder of the client: ``Env``'s calls (``reset``, ``step``,
    ``state``, the MCP ones) and ``EnvPool``'s build theirs here.  The frame is
    encoded at once (a step's action is refused here, before any IO); ``parse``
    turns the reply's ``data`` into the result.

    Args:
        kind: what the request is.
        data: a step's action object, a reset's arguments, a JSON-RPC request (``None`` for ``state``).
        parse: turns the reply's ``data`` into the call's result.

    Raises:
        InvalidActionType: a step's ``data`` is not a JSON object, or holds a value JSON cannot carry.
        InvalidAction: it holds ``NaN``/``Infinity`` or a circular reference.
    """

    __slots__ = ("kind", "frame", "parse")

    def __init__(self, kind: RequestKind, data: Mapping[str, Any] | None, parse: Callable[[dict[str, Any]], T]) -> None:
        if kind is _STEP or kind is _TOOL_STEP:
            frame = frames.encode_step(data)  # type: ignore[arg-type]  # encode_step refuses what is not a dict
        elif kind is _RESET:
            frame = frames.encode_reset(data or {})
        elif kind is _STATE:
            frame = frames.STATE_FRAME
        else:
            frame = frames.encode_mcp(data or {})
        self.kind, self.frame, self.parse = kind, frame, parse

    def __repr__(self) -> str:
        return f"Request({self.kind.name}, {self.frame!r})"


@dataclass(slots=True)
class Attempt:
    """One try of a request: what the session looked like when it was sent."""

    kind: RequestKind
    number: int
    #: the connection existed before this try (it may be stale)
    reused: bool
    #: an episode was in progress when it was sent
    had_episode: bool
    #: the frame left (``False``: the socket was already closed when sending)
    sent: bool = False


class Session:
    """The state machine of one client session: connected / episode / lost (reason) / closed."""

    __slots__ = ("where", "connected", "episode", "lost", "closed")

    def __init__(self, where: str) -> None:
        #: the server, as shown in messages (credentials redacted)
        self.where = where
        self.connected = False
        self.episode = False
        #: why the last episode was lost, until a reset or a reconnect
        self.lost: str | None = None
        self.closed = False

    # -- what may be sent now ----------------------------------------------------

    def check_open(self) -> None:
        """Raises [`EnvClosed`][openenv.sync.EnvClosed] once the client is closed."""
        if self.closed:
            raise EnvClosed(f"this client for {self.where} is closed; create a new one")

    def needs_connection(self, kind: RequestKind) -> bool:
        """Whether ``kind`` must open a connection first.

        Raises:
            SessionLost: the connection was lost during an episode and ``kind``
                does not start a new one.
        """
        if self.connected:
            return False
        if self.lost is not None and not kind.starts_episode:
            raise SessionLost(
                f"{self.lost}, so the episode on the server is gone; call reset() to "
                "start a new episode (it reconnects), or connect() to reconnect"
            )
        return True

    def attempt(self, kind: RequestKind, number: int, *, reused: bool) -> Attempt:
        """Record the start of a try, once the connection is there."""
        return Attempt(kind, number, reused, self.episode)

    # -- events from the IO layer ------------------------------------------------

    def opening(self) -> None:
        """A new connection is being opened (any previous one was dropped): nothing is lost any more."""
        self.connected = self.episode = False
        self.lost = None

    def opened(self) -> None:
        """The new connection is open."""
        self.connected = True

    def disconnected(self) -> None:
        """The connection is gone (closed by us, or dropped); its episode ended with it."""
        self.connected = self.episode = False

    def forget_loss(self) -> None:
        """An explicit disconnect: the next call starts afresh without complaint."""
        self.lost = None

    def lose(self, reason: str, *, had_episode: bool | None = None) -> None:
        """The connection was lost for ``reason``; a running episode is lost with it.

        ``had_episode`` overrides the current episode flag (the flag at the
        time the request was sent).
        """
        if self.episode if had_episode is None else had_episode:
            self.lost = reason
        self.disconnected()

    def replied(self, kind: RequestKind) -> None:
        """A reply of the expected type came: a reset or a step leaves an episode running."""
        if kind.in_episode:
            self.episode = True

    # -- what a failure means ----------------------------------------------------

    def may_retry(self, attempt: Attempt, error: OpenEnvError) -> bool:
        """Whether a request whose connection closed is sent once more on a fresh connection.

        Only the first try, only on a connection that existed before (a stale
        socket: a server restart, an idle timeout), only before any episode
        (nothing to lose), only for a plain [`SessionLost`][openenv.sync.SessionLost] (not a size
        refusal), never after close; and only for idempotent requests, or a
        step whose frame never left.
        """
        return (
            attempt.number == 1
            and attempt.reused
            and not attempt.had_episode
            and (attempt.kind.idempotent or (attempt.kind.is_step and not attempt.sent))
            and type(error) is SessionLost
            and not self.closed
        )

    @staticmethod
    def closed_reason(kind: RequestKind) -> str:
        return f"the connection closed during {kind.label}"

    @staticmethod
    def timeout_reason(kind: RequestKind) -> str:
        return f"no reply to {kind.label} came within message_timeout"

    @staticmethod
    def timeout_message(attempt: Attempt, timeout: float | None) -> str:
        return (
            f"no reply to {attempt.kind.label} within message_timeout={timeout} s; "
            "the connection was closed (a late reply would desynchronise it)"
            + ("; the episode is lost, call reset() to start a new one" if attempt.had_episode else "")
        )

    @staticmethod
    def interrupted_reason(kind: RequestKind) -> str:
        return f"the {kind.label} call was interrupted"

    @staticmethod
    def unsolicited_reason(kind: RequestKind) -> str:
        return f"the server sent a reply nobody asked for before {kind.label}"

    @staticmethod
    def unsolicited_message(attempt: Attempt) -> str:
        """The error for a message waiting on the socket before a request was sent (a second reply)."""
        return (
            f"the server sent a message that answers no request (before {attempt.kind.label}); "
            "the connection was closed because its state is unknown"
            + ("; the episode is lost, call reset() to start a new one" if attempt.had_episode else "")
        )

    @staticmethod
    def protocol_reason(kind: RequestKind) -> str:
        return f"the server broke the protocol during {kind.label}"

    @staticmethod
    def server_error_reason(error: ServerError) -> str | None:
        """Why a server error ends the session, or ``None`` when the session goes on."""
        return f"the server ended the session ({error.code})" if error.fatal else None

    OTHER_LOOP = "the session's connection was opened on another event loop"
    CLOSED = "the client was closed"


# -- production mode: which session the WebSocket serves ----------------------------


@dataclass(frozen=True)
class Target:
    """Where to open the WebSocket: ``create`` first asks ``POST /mcp`` for a session."""

    create: bool
    url: str | None


def ws_target(mode: str, state: McpState, ws_url: str) -> Target:
    """The ``/ws`` URL to open; ``create`` when production mode must first create a session over HTTP.

    Call again after creating (``state.session_id`` set) to get the attached URL.
    """
    if mode != PRODUCTION:
        return Target(False, ws_url)
    if state.session_id is None and state.attach:
        return Target(True, None)
    if not state.attach or state.session_id is None:
        return Target(False, ws_url)
    return Target(False, attach_url(ws_url, state.session_id))


def created(state: McpState, session_id: str) -> None:
    """A session was created over HTTP: the HTTP calls name it, and close releases it."""
    state.session_id, state.owned = session_id, True


@dataclass(frozen=True)
class AttachPlan:
    """What to do once the socket said which session it serves."""

    #: the socket serves the HTTP session: nothing to do
    ok: bool
    #: the socket has no session of its own (refused: capacity): reconnect without attaching
    reconnect: bool
    #: an HTTP-created session to close (``openenv/session/close``), if any
    release: str | None


def attach_plan(state: McpState, own: str | None) -> AttachPlan:
    """Decide after the socket answered ``own`` (``None``: it was refused for capacity).

    OpenEnv 0.3.0 servers ignore ``/ws?session_id=`` and give the socket a
    second session.  Then the HTTP-created session is released and the HTTP
    calls name the socket's own session, so one session is used; attaching is
    not tried again on this client.  Updates ``state``.
    """
    if own == state.session_id:
        return AttachPlan(True, False, None)
    release = state.session_id if state.owned else None
    state.attach, state.owned, state.session_id = False, False, own
    return AttachPlan(False, own is None, release)


def release_on_close(state: McpState) -> str | None:
    """The HTTP-created session to close when the client closes (at most once)."""
    if state.owned and state.session_id is not None:
        state.owned = False
        return state.session_id
    return None


__all__ += ["Target", "created", "release_on_close"]

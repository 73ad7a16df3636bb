"""One exception hierarchy, rooted at [`OpenEnvError`][openenv.sync.OpenEnvError], shared by both twins."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "OpenEnvError",
    "InvalidURL",
    "InvalidOption",
    "InvalidHeader",
    "ConnectError",
    "EnvTimeout",
    "ConnectTimeout",
    "MessageTimeout",
    "SessionLost",
    "SessionBusy",
    "EnvClosed",
    "ProtocolError",
    "MessageTooLarge",
    "ServerError",
    "InvalidJSON",
    "UnknownMessageType",
    "ServerValidationError",
    "ExecutionError",
    "CapacityReached",
    "FactoryError",
    "SessionError",
    "error_from_frame",
    "ErrorCode",
]


class ErrorCode:
    """The ``code`` values of the protocol's error frames."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"


class OpenEnvError(Exception):
    """Base class of every error raised by openenv."""


class InvalidURL(OpenEnvError, ValueError):
    """The base URL cannot name an OpenEnv server."""


class InvalidOption(OpenEnvError, ValueError):
    """An option of a client or provider has a value it cannot take (a ``nan`` timeout, ...)."""


class InvalidHeader(InvalidOption):
    """A header given in ``headers=`` cannot be sent: a bad name, or a value with a line break.

    The message names the header, never its value (it may be a token).

    Attributes:
        header: the header's name.
    """

    header: str

    def __init__(self, message: str, header: str = "") -> None:
        self.header = header
        super().__init__(message)

    def __reduce__(self) -> Any:
        return (type(self), (str(self), self.header))


class ConnectError(OpenEnvError, ConnectionError):
    """The WebSocket session could not be opened (refused, unreachable, rejected handshake).

    Attributes:
        status: the HTTP status of a refused upgrade (``503``: the server is
            overloaded or stopping, worth retrying later); ``None`` otherwise.
    """

    status: int | None = None


class EnvTimeout(OpenEnvError, TimeoutError):
    """A time budget ran out.

    The base of [`ConnectTimeout`][openenv.sync.ConnectTimeout] and [`MessageTimeout`][openenv.sync.MessageTimeout].
    """


class ConnectTimeout(EnvTimeout, ConnectError):
    """Opening the WebSocket took longer than ``connect_timeout``."""


class SessionLost(OpenEnvError, ConnectionError):
    """The session's connection is gone, and with it the server-side episode.

    Raised by the call during which the connection dropped, and by every later
    ``step``/``state`` until ``reset()`` (which reconnects and starts a new
    episode) or ``connect()`` is called.  The client never reconnects silently
    into a fresh, un-reset session in the middle of an episode.
    """


class MessageTimeout(EnvTimeout, SessionLost):
    """No reply came within ``message_timeout``.

    The late reply would desynchronise the socket, so the connection is closed
    and the session is lost.
    """


class SessionBusy(OpenEnvError, RuntimeError):
    """Another call is already in flight on this session.

    One session carries one request at a time; use ``new_session()`` (or another
    ``Env``) for concurrent work.
    """


class EnvClosed(OpenEnvError, RuntimeError):
    """The client was closed; create a new one."""


class ProtocolError(OpenEnvError):
    """The server broke the protocol (non-JSON frame, wrong reply type, ...).

    The connection is closed, since its state is unknown.
    """


class MessageTooLarge(ProtocolError):
    """A message exceeded a size limit (ours: ``max_message_size``, or the server's)."""


class ServerError(OpenEnvError):
    """The server answered with an error frame.

    Attributes:
        code: the protocol error code, such as ``"EXECUTION_ERROR"``.
        message: the server's message.
        details: every other field of the error frame (``errors``,
            ``active_sessions``, ``max_sessions``, ...).
        fatal: whether the server closes the connection after this error
            (a class attribute: ``True`` for [`CapacityReached`][openenv.sync.CapacityReached],
            [`FactoryError`][openenv.sync.FactoryError] and [`SessionError`][openenv.sync.SessionError]).
    """

    code: str
    message: str
    details: dict[str, Any]
    fatal: bool = False

    def __init__(self, message: str, code: str, details: Mapping[str, Any] | None = None) -> None:
        self.code = code
        self.message = message
        self.details = dict(details or {})
        super().__init__(f"{message} (code: {code})")

    def __reduce__(self) -> Any:
        return (type(self), (self.message, self.code, self.details))


class InvalidJSON(ServerError):
    """The server could not parse our frame as JSON."""


class UnknownMessageType(ServerError):
    """The server does not know the frame's ``type``."""


class ServerValidationError(ServerError):
    """The frame or the action failed the server's validation.

    [`errors`][openenv.sync.ServerValidationError.errors] holds the server's
    pydantic error objects; ``str(error)`` lists the first five.
    """

    @property
    def errors(self) -> list[Any]:
        """The server's pydantic error objects (``type``, ``loc``, ``msg``, ...); ``[]`` if it sent none."""
        errors = self.details.get("errors")
        return list(errors) if isinstance(errors, list) else []

    def __str__(self) -> str:
        base = super().__str__()
        parts = []
        for err in self.errors[:5]:
            if isinstance(err, dict):
                loc = ".".join(str(p) for p in err.get("loc", ()) or ())
                parts.append(f"{loc or '<root>'}: {err.get('msg', err)}")
        return f"{base}: {'; '.join(parts)}" if parts else base


class ExecutionError(ServerError):
    """The environment raised while handling the request; the session continues."""


class CapacityReached(ServerError):
    """The server is at its session capacity; the connection was closed.

    [`active_sessions`][openenv.sync.CapacityReached.active_sessions] and
    [`max_sessions`][openenv.sync.CapacityReached.max_sessions] come from the
    server.  Retry later, close another session, or raise the server's
    ``MAX_CONCURRENT_ENVS``.
    """

    fatal = True

    @property
    def active_sessions(self) -> int | None:
        """How many sessions the server had open, as it reported (``None`` if it did not say)."""
        value = self.details.get("active_sessions")
        return value if isinstance(value, int) else None

    @property
    def max_sessions(self) -> int | None:
        """The server's session limit, as it reported (``None`` if it did not say)."""
        value = self.details.get("max_sessions")
        return value if isinstance(value, int) else None


class FactoryError(ServerError):
    """The server could not create the environment; the connection was closed."""

    fatal = True


class SessionError(ServerError):
    """The server answered with a ``SESSION_ERROR`` frame and closed the connection.

    A server error, named after its wire code as every
    [`ServerError`][openenv.sync.ServerError] subclass is (``SESSION_ERROR``:
    the server could not serve this session, e.g. a binary message, or a
    ``session_id`` it does not know or that another WebSocket holds).  Not to
    be confused with the client-state errors
    [`SessionLost`][openenv.sync.SessionLost] (this client's connection is
    gone) and [`SessionBusy`][openenv.sync.SessionBusy] (this client already
    has a call in flight), which no server frame raises.  It is fatal: the
    session's episode is lost, and later calls raise ``SessionLost`` until
    ``reset()`` opens a new session.
    """

    fatal = True


_BY_CODE: dict[str, type[ServerError]] = {
    ErrorCode.INVALID_JSON: InvalidJSON,
    ErrorCode.UNKNOWN_TYPE: UnknownMessageType,
    ErrorCode.VALIDATION_ERROR: ServerValidationError,
    ErrorCode.EXECUTION_ERROR: ExecutionError,
    ErrorCode.CAPACITY_REACHED: CapacityReached,
    ErrorCode.FACTORY_ERROR: FactoryError,
    ErrorCode.SESSION_ERROR: SessionError,
}


def error_from_frame(data: Any) -> ServerError:
    """Build the exception for the ``data`` of an ``error`` frame."""
    if not isinstance(data, dict):
        return ServerError(f"malformed error frame: {data!r:.200}", "UNKNOWN")
    message = str(data.get("message", ""))
    code = str(data.get("code", "UNKNOWN"))
    details = {k: v for k, v in data.items() if k not in ("message", "code")}
    return _BY_CODE.get(code, ServerError)(message, code, details)


# --- provider errors ---
#
# Raised while starting, watching or removing the server of a session (a Docker
# container, a process, ...), never by a session's protocol traffic.


_TRACEBACK = "Traceback (most recent call last):"
#: a line of decoration only (a banner's ``*****``, ``=====``, ``-----``)
_DECORATION = re.compile(r"^[\W_]*$")
#: ``ValueError: ...``, ``nltk.LookupError:``, ``KeyboardInterrupt``: an exception line of a traceback
_EXCEPTION_LINE = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)(?::(?P<message>.*))?$")


def exception_line(output: str) -> str:
    """The exception a child process raised, from its output: ``"LookupError: Resource 'words' not found."``.

    The last traceback's exception line, with the first line of its message
    that is not decoration (NLTK's ``LookupError`` starts its message with a
    line of asterisks); ``""`` when the output holds no traceback.
    """
    lines = output.splitlines()
    start = max((i for i, line in enumerate(lines) if line.strip() == _TRACEBACK), default=-1)
    if start < 0:
        return ""
    rest = lines[start + 1 :]
    for i, line in enumerate(rest):
        if not line or line[0].isspace():
            continue  # a frame, its source line, its ^^^^ markers
        match = _EXCEPTION_LINE.match(line.strip())
        if match is None:
            return line.strip()
        name, message = match.group("name"), (match.group("message") or "").strip()
        if not message or _DECORATION.match(message):
            message = next((x.strip() for x in rest[i + 1 :] if x.strip() and not _DECORATION.match(x.strip())), "")
        return f"{name}: {message}" if message else name
    return ""


def last_meaningful_line(output: str) -> str:
    """The exception line of the output's last traceback, else its last line that is not decoration."""
    raised = exception_line(output)
    if raised:
        return raised
    lines = [line.strip() for line in output.splitlines() if line.strip() and not _DECORATION.match(line.strip())]
    return lines[-1] if lines else ""


def _tail_text(logs: str, limit: int = 4000) -> str:
    logs = (logs or "").rstrip()
    return logs if len(logs) <= limit else "..." + logs[-limit:]


class ProviderError(OpenEnvError):
    """Starting, inspecting or stopping an environment's server failed."""


class DockerUnavailable(ProviderError, ConnectionError):
    """No Docker engine answered (or the ``docker`` package is not installed)."""


class ImageNotFound(ProviderError, LookupError):
    """The image is not present locally, or the registry does not have it.

    Attributes:
        image: the image reference as given.
    """

    image: str

    def __init__(self, message: str, image: str = "") -> None:
        self.image = image
        super().__init__(message)

    def __reduce__(self) -> Any:
        return (type(self), (str(self), self.image))


class PortNotPublished(ProviderError, LookupError):
    """The container has no host binding for the port the server listens on."""


class ContainerExited(ProviderError):
    """The container stopped before it became ready.

    Attributes:
        container: the container's name (or id).
        exit_code: its exit code, when Docker reported one.
        logs: the last lines of its output (stdout and stderr).
    """

    container: str
    exit_code: int | None
    logs: str

    def __init__(self, container: str, exit_code: int | None, logs: str = "", status: str = "exited") -> None:
        self.container = container
        self.exit_code = exit_code
        self.logs = logs or ""
        self.status = status
        code = "unknown" if exit_code is None else str(exit_code)
        msg = f"container {container} {status} before it became ready (exit code {code})"
        raised = exception_line(self.logs)
        if raised:
            msg += f": it raised {raised}"
        tail = _tail_text(self.logs)
        if tail:
            msg += "; last log lines:\n" + tail
        else:
            msg += "; it printed nothing"
        super().__init__(msg)

    def __reduce__(self) -> Any:
        return (type(self), (self.container, self.exit_code, self.logs, self.status))


class ReadinessTimeout(ProviderError, EnvTimeout):
    """The server did not answer its health check within the time budget.

    Attributes:
        logs: the last lines of the server's output, when known.
    """

    logs: str

    def __init__(self, message: str, logs: str = "") -> None:
        self.logs = logs or ""
        tail = _tail_text(self.logs)
        super().__init__(f"{message}; last log lines:\n{tail}" if tail else message)
        self.message = message

    def __reduce__(self) -> Any:
        return (type(self), (self.message, self.logs))


class CheckoutNotRunnable(ProviderError):
    """No interpreter can run a local environment checkout's server.

    The message names each remedy (the checkout's own ``.venv``, ``uv``,
    ``install=True``, ``command=[...]``) and the error the current interpreter
    met when it tried to import the server app.

    Attributes:
        directory: the checkout.
        probe_error: the last line of that import error (``""`` when not probed).
    """

    directory: str
    probe_error: str

    def __init__(self, message: str, directory: str = "", probe_error: str = "") -> None:
        self.directory = directory
        self.probe_error = probe_error
        super().__init__(message)

    def __reduce__(self) -> Any:
        return (type(self), (str(self), self.directory, self.probe_error))


class BootstrapError(ProviderError):
    """Some of several servers started together failed; every one that started was stopped.

    Raised when starting more than one provider at once (a pool of servers);
    with a single provider its own error is raised instead.  The message lists
    each failed provider's index and its error's message (with the server's
    last log lines when the provider gave them).

    Attributes:
        failures: the index of each failed provider (its position in the
            list given) and the error it raised, by index.
        total: how many providers were started together.
    """

    failures: dict[int, BaseException]

    def __init__(self, failures: Mapping[int, BaseException], total: int = 0) -> None:
        self.failures = dict(sorted(failures.items()))
        self.total = total or len(self.failures)
        # identical causes (8 pulls of one missing image) are listed once, with their indices
        groups: dict[str, list[int]] = {}
        for index, exc in self.failures.items():
            text = str(exc) or type(exc).__name__
            logs = getattr(exc, "logs", "")
            tail = _tail_text(logs).strip() if isinstance(logs, str) else ""
            if tail and tail not in text:
                text += "; last log lines:\n" + tail
            groups.setdefault(f"{type(exc).__name__}: {text}", []).append(index)
        head = f"{len(self.failures)} of {self.total} servers failed to start; every server was stopped"
        if len(groups) == 1:
            ((text, indices),) = groups.items()
            message = f"{len(self.failures)} of {self.total} servers failed to start (every server was stopped)"
            if len(indices) == self.total > 1:
                message += f", all with: {text}"
            else:  # which ones, as the tests and a reader of a partial failure want to know
                message += f": [{', '.join(map(str, indices))}] {text}"
        else:
            lines = [head + ":"]
            for text, indices in groups.items():
                which = ", ".join(map(str, indices))
                lines.append(f"  [{which}] " + text.replace("\n", "\n      "))
            message = "\n".join(lines)
        super().__init__(message)

    def __reduce__(self) -> Any:
        return (type(self), (self.failures, self.total))


__all__ += [
    "BootstrapError",
    "ProviderError",
    "DockerUnavailable",
    "ImageNotFound",
    "PortNotPublished",
    "ContainerExited",
    "ReadinessTimeout",
    "CheckoutNotRunnable",
]


# --- MCP tool errors ---
#
# Raised by ``list_tools``/``call_tool``/``get_tool``: a JSON-RPC error from the
# server (``mcp`` frame or ``POST /mcp``), or an ``error`` object in a
# ``call_tool`` step observation.  Never swallowed into an empty result.


class ToolError(OpenEnvError):
    """An MCP request failed on the server (JSON-RPC error, or a step-loop tool error).

    In simulation mode a ``call_tool`` is a real step: when the tool fails
    there, the step still happened (the environment counted it, and may have
    scored it, typically with a penalty, or ended the episode).  The step's
    ``reward``, ``done`` and whole ``result`` are then kept on the error, so a
    trainer loses nothing.  Errors that were not a step (JSON-RPC errors,
    production mode) have ``reward=None``, ``done=False`` and ``result=None``.

    Attributes:
        message: the server's message, such as ``"Error calling tool 'fail': bad"``.
        code: the JSON-RPC error code (``-32603`` tool raised / no MCP support,
            ``-32602`` bad params or unknown session, ``-32000`` capacity, ...),
            or ``None`` when the server sent none.
        data: the JSON-RPC ``error.data`` (for step-loop errors: the
            observation's ``error`` object, with its ``error_type``).
        tool: the tool's name, for ``tools/call``.
        reward: the failed call's step reward (simulation mode), or ``None``.
        done: whether the failed call's step ended the episode (simulation mode).
        result: the failed call's step result (a ``StepResult``: the
            ``call_tool`` observation, ``reward``, ``done``, ``metadata``), or
            ``None`` when the failure was not a step.
    """

    message: str
    code: int | None
    data: Any
    tool: str | None
    reward: float | None
    done: bool
    result: Any

    def __init__(
        self,
        message: str,
        code: int | None = None,
        data: Any = None,
        tool: str | None = None,
        *,
        reward: float | None = None,
        done: bool = False,
        result: Any = None,
    ) -> None:
        self.message = message
        self.code = code
        self.data = data
        self.tool = tool
        self.reward = reward
        self.done = done
        self.result = result
        text = message if code is None else f"{message} (JSON-RPC error {code})"
        super().__init__(text)

    def __reduce__(self) -> Any:
        state = {"reward": self.reward, "done": self.done, "result": self.result}
        return (type(self), (self.message, self.code, self.data, self.tool), state)


class ToolNotFound(ToolError, LookupError):
    """No tool of that name (``get_tool``, or the server's unknown-tool error)."""


__all__ += ["ToolError", "ToolNotFound"]


class ParseError(OpenEnvError, ValueError):
    """A reply arrived but the client's codec could not parse it.

    The server did the work (the step happened, the state was read), so the
    connection stays open and the session stays in step with the server: the
    next call works as usual.  The raw reply is kept.

    Attributes:
        payload: the ``data`` object of the reply, as the server sent it.
        kind: ``"observation"`` (a ``reset``/``step`` reply) or ``"state"``.
    """

    def __init__(self, message: str, *, payload: Mapping[str, Any] | None = None, kind: str = "observation") -> None:
        super().__init__(message)
        self.message = message
        self.payload: dict[str, Any] = dict(payload or {})
        self.kind = kind


class InvalidAction(OpenEnvError, ValueError):
    """An action was refused by the client before anything was sent.

    Attributes:
        errors: pydantic's error list (``ValidationError.errors()``) when the
            action failed validation against the codec's action model, else ``[]``.
    """

    def __init__(self, message: str, *, errors: list[Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errors: list[Any] = list(errors or [])


class InvalidActionType(InvalidAction, TypeError):
    """The action is of the wrong type: not a dict or a model of the codec's action union,
    or a dict holding values JSON cannot carry (a ``set``, an object)."""


__all__ += ["ParseError", "InvalidAction", "InvalidActionType"]


class PoolError(OpenEnvError):
    """One or more sessions of an ``EnvPool`` failed during ``reset``/``step`` (or could not be replaced).

    The other sessions' results still came back.  Both fields are keyed by
    pool index: ``results[i]`` is session ``i``'s result (``None`` where it
    failed) and ``errors[i]`` its error, whatever ``ids`` the call was given.
    ``results`` lists the call's sessions in the call's order.  A failed
    session stays marked failed until ``pool.reset(ids=[i])`` or ``pool.replace(i)``.

    Attributes:
        results: session index -> result, for every session of the call, in
            the call's order (``None`` at the failed ones; for ``recv()``,
            the sessions it read, in order of arrival).
        errors: session index -> error, for every failed session.
    """

    def __init__(
        self,
        message: str,
        results: Mapping[int, Any] | None = None,
        errors: Mapping[int, OpenEnvError] | None = None,
    ) -> None:
        self.results: dict[int, Any] = dict(results or {})
        self.errors: dict[int, OpenEnvError] = dict(errors or {})
        super().__init__(message)

    def __reduce__(self) -> Any:
        return (type(self), (str(self), self.results, self.errors))


__all__ += ["PoolError"]

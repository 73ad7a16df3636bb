"""Client options, validated once and shared by ``Env``, ``new_session`` and the providers."""

from __future__ import annotations

import logging
import math
import os
import re
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeAlias

from typing_extensions import TypedDict

from .errors import InvalidHeader, InvalidOption
from .urls import Endpoints, redact_target, redact_url, scrub, url_secrets

__all__ = [
    "ClientOptions",
    "HttpSettings",
    "EnvOptions",
    "VerifyTypes",
    "tls_hint",
    "RedactHeaders",
    "RedactSecrets",
    "redact_logger",
    "check_timeout",
    "check_headers",
    "check_verify",
    "check_options",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "CLOSE_TIMEOUT",
    "DEFAULTS",
    "READY_TIMEOUT",
    "HARMLESS_HEADERS",
]

DEFAULT_MAX_MESSAGE_SIZE = 100 * 1024 * 1024

#: Seconds ``close()`` waits at most for the server's closing handshake (less with a shorter ``message_timeout``).
CLOSE_TIMEOUT = 5.0

#: How to check the server's TLS certificate (httpx's convention): ``True``
#: (the default trust store), a CA bundle file or directory, an
#: `ssl.SSLContext`, or ``False`` (no check at all).
VerifyTypes: TypeAlias = bool | str | os.PathLike[str] | ssl.SSLContext

#: Header names whose values are shown in debug logs; every other header
#: (``Authorization``, ``Cookie``, ``X-Api-Key``, any custom one) is hidden.
HARMLESS_HEADERS = frozenset(
    {
        "host",
        "user-agent",
        "accept",
        "accept-encoding",
        "accept-language",
        "content-type",
        "content-length",
        "origin",
        "connection",
        "upgrade",
        "date",
        "server",
        "sec-websocket-version",
        "sec-websocket-extensions",
        "sec-websocket-protocol",
        "sec-websocket-key",
        "sec-websocket-accept",
    }
)

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_VALUE = re.compile(r"^[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?$")


class RedactHeaders(logging.Filter):
    """Hide header values (but a few harmless ones) and query values in websockets' handshake debug lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple):
            if len(args) == 2 and str(args[0]).lower() not in HARMLESS_HEADERS:
                record.args = (args[0], "<hidden>")
            elif len(args) == 1 and isinstance(args[0], str) and "?" in args[0]:
                record.args = (redact_target(args[0]),)
        return True


class DropCloseRace(logging.Filter):
    """Drop websockets' (< 17) "unexpected internal error" for data read just as the connection was closed.

    ``close_socket()`` from another thread (a call abandoned: Ctrl-C, a timeout)
    ends the protocol's stream while the reader thread may already hold bytes it
    read a moment before; feeding them raises ``EOFError("stream ended")``, which
    websockets 15 and 16 log at ERROR with a traceback (printed by Python's
    last-resort handler when logging is not configured).  Nothing is lost: the
    connection is closed on purpose.  Every other record passes.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (
            record.msg == "unexpected internal error" and isinstance(exc, EOFError) and str(exc) == "stream ended"
        )


#: websockets' header lines (client and server, both directions).
_HEADER_LINES = frozenset({"> %s: %s", "< %s: %s"})


def _redact_arg(arg: Any) -> Any:
    """A log argument with its secrets hidden: a URL's credentials and query values, a target's query values."""
    if arg is None or isinstance(arg, (bool, int, float, bytes)):
        return arg
    text = str(arg)  # httpx logs its URL objects
    if "://" in text:
        shown = redact_url(text)
        return arg if shown == text else shown
    if text.startswith("/") and "?" in text:
        return redact_target(text)
    return arg


class RedactSecrets(logging.Filter):
    """Hide secrets in a library's log lines: header values, URL credentials, query values.

    For the loggers of the libraries we configure (httpx's ``HTTP Request:``
    line, websockets' and uvicorn's server lines: `redact_logger()`): a
    websockets header line (``< authorization: ...``) keeps only the values
    of `HARMLESS_HEADERS`; any other argument that is a URL shows as
    `redact_url()` does, and a request target (``/ws?token=...``, uvicorn's
    access lines) with its query values as ``***``.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and args:
            if record.msg in _HEADER_LINES and len(args) == 2:
                if str(args[0]).lower() not in HARMLESS_HEADERS:
                    record.args = (args[0], "<hidden>")
            else:
                record.args = tuple(_redact_arg(arg) for arg in args)
        return True


def redact_logger(logger: logging.Logger) -> logging.Logger:
    """Add a `RedactSecrets` filter to ``logger`` (once); return it."""
    if not any(isinstance(f, RedactSecrets) for f in logger.filters):
        logger.addFilter(RedactSecrets())
    return logger


#: The logger our connections use: websockets' own lines.  Its
#: `RedactHeaders` filter (credentials hidden) is added where
#: connections are made (``openenv._adapters.connect_kwargs``), not at import.
WS_LOGGER = logging.getLogger("openenv.websockets")


def check_timeout(name: str, value: float | None) -> float | None:
    """``value`` as a float number of seconds, ``None`` for no limit (``inf`` means no limit too).

    Raises:
        InvalidOption: for ``nan``, zero, a negative number or a non-number.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidOption(f"{name} must be a positive number of seconds or None, not {value!r}")
    if math.isnan(value) or value <= 0:
        raise InvalidOption(f"{name} must be a positive number of seconds or None (no limit), not {value!r}")
    if math.isinf(value):
        return None  # no limit: the same as None on both twins
    return float(value)


def check_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """A copy of ``headers``, checked so that every one can be sent as given.

    Raises:
        TypeError: a name or value is not a ``str``.
        InvalidHeader: a name is not an HTTP token, or a value has a line
            break, a control or non-ASCII character, or surrounding whitespace
            (the message names the header, never its value).
    """
    result = dict(headers or {})
    for name, value in result.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError("headers must map str to str")
        if not _TOKEN.fullmatch(name):
            raise InvalidHeader(f"invalid header name {name!r}: use letters, digits and -", name)
        if not _VALUE.fullmatch(value):
            if value != value.strip():
                why = "has leading or trailing whitespace (a token read from a file keeps its newline: strip() it)"
            elif not value:
                why = "is empty"
            else:
                why = "has a line break, a control character or a non-ASCII character"
            raise InvalidHeader(f"the value of header {name!r} {why}; its value is not shown", name)
    return result


def check_verify(verify: Any) -> VerifyTypes:
    """``verify`` checked: ``True``, ``False``, an existing CA bundle path, or an ``ssl.SSLContext``.

    Raises:
        InvalidOption: for anything else, or a path that does not exist.
    """
    if isinstance(verify, (bool, ssl.SSLContext)):
        return verify
    if isinstance(verify, (str, os.PathLike)):
        path = os.fspath(verify)
        if not isinstance(path, str) or not os.path.exists(path):
            raise InvalidOption(f"verify={verify!r}: no such CA bundle file or directory")
        return path
    raise InvalidOption(
        f"verify must be True, False, a CA bundle path or an ssl.SSLContext, not {type(verify).__name__}"
    )


def _ssl_context(verify: VerifyTypes) -> ssl.SSLContext:
    if isinstance(verify, ssl.SSLContext):
        return verify
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if verify is True:
        return ssl.create_default_context()
    path = os.fspath(verify)
    if os.path.isdir(path):
        return ssl.create_default_context(capath=path)
    return ssl.create_default_context(cafile=path)


@dataclass(frozen=True)
class HttpSettings:
    """How every HTTP client of this library is built (``openenv._async.http``), from one rule.

    ``GET /schema``, ``GET /metadata``, the readiness polls of ``GET /health``,
    production-mode ``POST /mcp`` and the command line all take their client
    from [`ClientOptions.http_settings()`][openenv._core.options.ClientOptions.http_settings].

    Attributes:
        trust_env: read ``$HTTP(S)_PROXY``, ``$NO_PROXY``, ``.netrc`` and
            ``$SSL_CERT_*``: for remote hosts only; loopback and private hosts
            are reached directly (the WebSocket does the same: ``proxy=None``).
        headers: the client's headers (tokens included; never logged).
        verify: httpx's ``verify``: ``http_verify()`` for ``https``, ``False``
            for plain ``http`` (which has no certificate: no TLS context to build).
        connect_timeout: seconds to connect (``connect_timeout``).
        read_timeout: seconds for the answer (``message_timeout``).
    """

    trust_env: bool
    headers: dict[str, str] = field(repr=False)
    verify: bool | ssl.SSLContext
    connect_timeout: float | None
    read_timeout: float | None


@dataclass(frozen=True)
class ClientOptions:
    """A client's connection options: what [`Env.options`][openenv.sync.Env.options] returns (frozen).

    One field per connection keyword of [`Env`][openenv.sync.Env] (see it for
    their meaning and defaults); the values are checked when it is built, and
    ``headers`` is hidden in its repr (they may hold a token).  It is one class
    in both flavours.  Its methods serve the client's connection code and are
    not part of the public API.

    Attributes:
        connect_timeout: seconds to open the connection (``None``: no limit).
        message_timeout: seconds to wait for each reply (``None``: no limit).
        max_message_size: the largest message accepted, in bytes (``None``: no limit).
        ping_interval: seconds between keepalive pings (``None``: none).
        ping_timeout: seconds to wait for a pong (``None``: no limit).
        headers: extra HTTP headers of the handshake and HTTP calls.
        compression: per-message deflate (``None``: automatic, remote hosts only).
        verify: the TLS check (``True``, a CA bundle path, an ``ssl.SSLContext`` or ``False``).
    """

    # the defaults of every constructor: Env(...)'s signature reads them from DEFAULTS
    connect_timeout: float | None = 10.0
    message_timeout: float | None = 60.0
    max_message_size: int | None = DEFAULT_MAX_MESSAGE_SIZE
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    compression: bool | None = None
    verify: VerifyTypes = True

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "message_timeout", "ping_interval", "ping_timeout"):
            object.__setattr__(self, name, check_timeout(name, getattr(self, name)))
        size = self.max_message_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
            raise InvalidOption(f"max_message_size must be a positive int (bytes) or None, not {size!r}")
        object.__setattr__(self, "headers", check_headers(self.headers))
        if self.compression not in (None, True, False):
            raise InvalidOption(f"compression must be True, False or None (automatic), not {self.compression!r}")
        object.__setattr__(self, "verify", check_verify(self.verify))

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> ClientOptions:
        """The options among ``Env(...)``'s keyword arguments (others, such as ``mode``, are ignored)."""
        names = ClientOptions.__dataclass_fields__
        return cls(**{k: v for k, v in options.items() if k in names})

    def __repr__(self) -> str:
        # headers may carry tokens: show their names only
        verify = "<SSLContext>" if isinstance(self.verify, ssl.SSLContext) else repr(self.verify)
        return (
            f"ClientOptions(connect_timeout={self.connect_timeout}, message_timeout={self.message_timeout}, "
            f"max_message_size={self.max_message_size}, ping_interval={self.ping_interval}, "
            f"ping_timeout={self.ping_timeout}, headers=<{len(self.headers)} hidden>, "
            f"compression={self.compression}, verify={verify})"
        )

    def compress(self, endpoints: Endpoints) -> bool:
        """Whether to negotiate permessage-deflate: off on loopback and private hosts by default."""
        if self.compression is None:
            return not endpoints.is_local
        return self.compression

    @cached_property
    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context that ``verify`` asks for (built once, on first use)."""
        return _ssl_context(self.verify)

    def http_verify(self) -> bool | ssl.SSLContext:
        """httpx's ``verify`` argument.

        ``True`` keeps httpx's own trust store (certifi), unless
        ``$SSL_CERT_FILE`` or ``$SSL_CERT_DIR`` is set: then the HTTP calls
        trust what the WebSocket trusts (the system store those variables
        point to), for local hosts too.
        """
        if self.verify is True and not (os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR")):
            return True
        return self.ssl_context

    def http_settings(self, endpoints: Endpoints) -> HttpSettings:
        """The settings of an HTTP client for ``endpoints`` (see `HttpSettings`)."""
        secure = endpoints.http_url.startswith("https:")
        return HttpSettings(
            trust_env=not endpoints.is_local,
            headers=dict(self.headers),
            verify=self.http_verify() if secure else False,
            connect_timeout=self.connect_timeout,
            read_timeout=self.message_timeout,
        )

    @property
    def close_timeout(self) -> float:
        """Seconds ``close()`` waits for the closing handshake: `CLOSE_TIMEOUT`, or a shorter ``message_timeout``.

        A server that does not answer the close frame (hung, or behind a
        black-holing network) costs a ``close()`` no more than the client's own
        reply deadline.
        """
        if self.message_timeout is None:
            return CLOSE_TIMEOUT
        return min(CLOSE_TIMEOUT, self.message_timeout)

    def ws_kwargs(self, endpoints: Endpoints) -> dict[str, Any]:
        """Keyword arguments for websockets' ``connect`` (the same on both sides)."""
        kwargs: dict[str, Any] = {
            "open_timeout": self.connect_timeout,
            "max_size": self.max_message_size,
            "ping_interval": self.ping_interval,
            "ping_timeout": self.ping_timeout,
            "compression": "deflate" if self.compress(endpoints) else None,
            "close_timeout": self.close_timeout,
            "user_agent_header": "openenv-twin (websockets)",
            "logger": WS_LOGGER,
        }
        if self.headers:
            kwargs["additional_headers"] = dict(self.headers)
        if endpoints.is_local:
            kwargs["proxy"] = None
        if self.verify is not True and endpoints.ws_url.startswith("wss:"):
            kwargs["ssl"] = self.ssl_context
        return kwargs

    def scrub(self, text: str, url: str = "") -> str:
        """``text`` with every header value and ``url``'s secrets as ``<hidden>``.

        ``url``'s secrets: its password and query values, and for a URL hidden
        as a whole (a cloud sandbox's), its host and path.

        For library error messages and excerpts of a server's answers (a
        server may echo the request it got).
        """
        return scrub(text, self.secrets(url))

    def secrets(self, url: str = "") -> list[str]:
        """What `scrub()` hides: the header values, and ``url``'s secrets (`openenv._core.urls.url_secrets`)."""
        return [*self.headers.values(), *url_secrets(url)]


def tls_hint(url: str, exc: BaseException) -> str:
    """The message for a server certificate that failed verification."""
    reason = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or str(exc)
    return (
        f"TLS certificate verification failed for {url} ({reason}); if the server uses a private CA, "
        "pass verify='/path/to/ca.pem' or verify=ssl_context to Env(...)"
    )


#: The default options, defined once (``ClientOptions``' field defaults): ``Env(...)``'s
#: signature takes its default values from here; ``tests/test_core.py`` checks they agree.
DEFAULTS = ClientOptions()

#: Seconds a constructor that starts a server waits for ``GET /health`` by default.
READY_TIMEOUT = 60.0


class EnvOptions(TypedDict, total=False):
    """The connection options of ``Env(...)``, accepted by its other constructors too."""

    connect_timeout: float | None
    message_timeout: float | None
    max_message_size: int | None
    ping_interval: float | None
    ping_timeout: float | None
    headers: Mapping[str, str] | None
    compression: bool | None
    verify: VerifyTypes
    mode: str | None


def check_options(options: Mapping[str, Any], where: str, others: Iterable[str] = ()) -> ClientOptions:
    """The connection options among ``where``'s keyword arguments, refused before anything starts.

    A constructor that starts a server or a container (``Env.from_env``,
    ``EnvPool.from_docker_image``, ``environment_factory``, ...) passes its
    ``**options`` on to ``Env(...)`` only once the server is up; this check
    makes a misspelt name or a bad value fail at once instead, naming the
    function the caller called.

    Raises:
        TypeError: a name that is not an option of ``Env(...)`` (with a "did you mean", among
            ``others`` too: the caller's own keyword arguments, such as an ``EnvPool``'s options).
        InvalidOption: a value out of range (``mode`` included).
    """
    import difflib

    from .mcp import resolve_mode

    known = EnvOptions.__annotations__
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, [*known, *others], n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(f"{where}() got an unexpected keyword argument {name!r}{hint}")
    if options.get("mode") is not None:
        resolve_mode(options["mode"])
    return ClientOptions.of(options)

"""URL rules: base URL → WebSocket and HTTP endpoints, and Hugging Face Space names."""

from __future__ import annotations

import base64
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import SplitResult, unquote, unquote_plus, urlsplit, urlunsplit

from .errors import InvalidURL

__all__ = [
    "Endpoints",
    "parse_base_url",
    "is_local_host",
    "space_subdomain",
    "space_url",
    "space_image",
    "redact_url",
    "redact_query",
    "redact_target",
    "hide_url",
    "unhide_url",
    "hidden_label",
    "url_secrets",
    "scrub",
    "DEFAULT_SPACE_REGISTRY",
]

_HTTP_FOR = {"http": "http", "https": "https", "ws": "http", "wss": "https"}
_WS_FOR = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}

DEFAULT_SPACE_REGISTRY = "registry.hf.space"


@dataclass(frozen=True)
class Endpoints:
    """The URLs of one OpenEnv server, derived from a user's base URL.

    Attributes:
        base_url: the normalised base URL (scheme lower-cased, trailing ``/``
            and a trailing ``/ws`` removed, query kept).
        ws_url: the session WebSocket URL (``.../ws``, query kept).
        http_url: the HTTP root for ``/health``, ``/schema`` and friends.
        host: the host name or address.
        is_local: whether the host is loopback or a private address.
    """

    base_url: str
    ws_url: str
    http_url: str
    host: str
    is_local: bool

    def __repr__(self) -> str:
        return f"Endpoints({redact_url(self.base_url)!r})"

    def http(self, path: str) -> str:
        """The HTTP URL of ``path`` (such as ``"/health"``) on this server."""
        return self.http_url + path


def _split(url: str) -> SplitResult:
    if not isinstance(url, str):
        raise InvalidURL(f"base_url must be a str, not {type(url).__name__}")
    text = url.strip()
    if not text:
        raise InvalidURL("base_url is empty; expected something like 'http://127.0.0.1:8000'")
    if not _SCHEME.match(text):
        text = "http://" + text
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - validates the port
        if "@" in text and _misread_credentials(parts):
            # "http://admin:1234/pw@host" parses, as the host "admin" with the port 1234: refused, not sent there
            raise ValueError("credentials misread")
    except ValueError as exc:
        shown = redact_url(url)
        # the parser's reason quotes the part it choked on: for "user:pa/ss@host", a piece of the password
        reason = (
            "its user name or password holds '/', '?', '#' or '@': percent-encode them "
            "(urllib.parse.quote(..., safe='')); an '@' of the path is written %40"
            if "@" in text and shown != url
            else str(exc)
        )
        raise InvalidURL(f"invalid base_url {shown!r}: {reason}") from None
    return parts


def parse_base_url(url: str) -> Endpoints:
    """Normalise a base URL and derive the endpoint URLs.

    ``http(s)://`` and ``ws(s)://`` are accepted (any case); a URL without a
    scheme is taken as ``http://``.  A trailing ``/ws`` is accepted and not
    doubled, path prefixes and query strings are kept, fragments are dropped.

    Raises:
        InvalidURL: for another scheme, a missing host, a host with whitespace
            or control characters, or a bad port.
    """
    parts = _split(url)
    scheme = parts.scheme.lower()
    if scheme not in _WS_FOR:
        raise InvalidURL(
            f"unsupported scheme {parts.scheme!r} in base_url {redact_url(url)!r}; "
            "use http://, https://, ws:// or wss://"
        )
    host = parts.hostname or ""
    if not host:
        raise InvalidURL(f"base_url {redact_url(url)!r} has no host")
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in parts.netloc):
        raise InvalidURL(f"base_url {redact_url(url)!r} has whitespace or a control character in its host")
    path = parts.path.rstrip("/")
    if path.endswith("/ws"):
        path = path[: -len("/ws")].rstrip("/")
    netloc = parts.netloc
    base_url = urlunsplit((scheme, netloc, path, parts.query, ""))
    ws_url = urlunsplit((_WS_FOR[scheme], netloc, path + "/ws", parts.query, ""))
    http_url = urlunsplit((_HTTP_FOR[scheme], netloc, path, "", ""))
    return Endpoints(base_url, ws_url, http_url, host, is_local_host(host))


def is_local_host(host: str) -> bool:
    """Whether ``host`` is ``localhost``, a loopback, private or link-local address.

    Host names other than ``localhost`` count as remote (nothing is resolved).
    """
    name = host.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


#: URLs that are secrets as a whole (a cloud sandbox's URL is often a bearer capability):
#: ``host[:port]/path`` (lower-cased host, no trailing ``/``) -> what to show instead
_HIDDEN: dict[str, str] = {}


def _hidden_key(url: str) -> str | None:
    try:
        parts = urlsplit(url if "://" in url else "//" + url)
    except ValueError:
        return None
    netloc = parts.netloc.rpartition("@")[2].lower()
    return netloc + parts.path.rstrip("/") if netloc else None


def hide_url(url: str, label: str) -> None:
    """Treat ``url`` and every URL below it (any scheme: ``http``, ``ws``, ...) as a secret.

    `redact_url` then shows ``<label>`` for it, in every repr, log and error.
    """
    key = _hidden_key(url)
    if key is not None:
        _HIDDEN[key] = label


def unhide_url(url: str) -> None:
    """Undo `hide_url` (once the server is gone)."""
    key = _hidden_key(url)
    if key is not None:
        _HIDDEN.pop(key, None)


def hidden_label(url: str) -> str | None:
    """The label `hide_url` gave ``url`` (or a URL above it), else ``None``: what another process must hide too."""
    key = _hidden_key(url) if _HIDDEN else None
    if key is not None:
        for hidden, label in list(_HIDDEN.items()):
            if key == hidden or key.startswith(hidden + "/"):
                return label
    return None


def redact_url(url: str) -> str:
    """``url`` fit to show in messages, reprs and logs: no secrets.

    A URL given to `hide_url` (or one below it) is shown as its label only.

    ``user:password@`` credentials become ``***@`` (also in a URL without a
    scheme, ``user:pw@host``), every query value becomes ``***`` (the keys
    stay, so ``?token=abc&x=1`` shows as ``?token=***&x=***``; a bare item such
    as ``?abc`` becomes ``?***``), and a fragment becomes ``#***``.
    """
    label = hidden_label(url)
    if label is not None:
        return label
    bare = not _SCHEME.match(url)  # "user:pw@host": the credentials are there all the same
    try:
        parts = urlsplit("//" + url if bare else url)
        has_credentials = parts.username is not None or parts.password is not None
        segment = _first_segment(parts)
        if "@" in url and (_misread_credentials(parts) or ("@" in segment and not segment.startswith("@"))):
            # an "@" past the authority may end credentials that hold "/", "?" or "#" ("tok/en@host"): when in
            # doubt, nothing before the last "@" is shown (an "@" that starts a segment, "/@alice", is the path's)
            return _redact_loose(url, bare)
    except ValueError:
        return _redact_loose(url, bare) if "@" in url else "<invalid url>"
    if not has_credentials and not parts.query and not parts.fragment:
        return url
    netloc = "***@" + parts.netloc.rpartition("@")[2] if has_credentials else parts.netloc
    query = redact_query(parts.query)
    fragment = "***" if parts.fragment else ""
    redacted = urlunsplit((parts.scheme, netloc, parts.path, query, fragment))
    return redacted[2:] if bare else redacted


#: a URL that names its scheme ("http://", "wss://"): not "user:pw@host/?next=https://x", which has none
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def _misread_credentials(parts: SplitResult) -> bool:
    """Whether an ``@`` past the URL's authority ends credentials all the same.

    A password holding ``/``, ``?`` or ``#`` ends the authority early:
    ``http://user:pa/ss@host`` reads as the host ``user``, the port ``pa`` (no
    number) and the path ``/ss@host``; ``user:pa?ss@host`` puts ``ss@host`` in
    the query, before any ``=``.  An ``@`` in a query value (``?email=a@b``)
    is no such sign.
    """
    try:
        port = parts.port
    except ValueError:  # a port that is no number
        return True
    query = parts.query
    if "@" in parts.fragment or ("@" in query and "=" not in query.partition("@")[0]):
        return True
    # "admin:1234/pw@host" (an explicit port) or "user:p@ss/w@host" (credentials found): the "@" ends the
    # first segment's credentials; an "@" in a path without either is the path's (Coder's "/@alice/...")
    return "@" in _first_segment(parts) and (port is not None or "@" in parts.netloc)


def _first_segment(parts: SplitResult) -> str:
    return parts.path.lstrip("/").partition("/")[0]


def _redact_loose(url: str, bare: bool) -> str:
    """``url`` with everything up to its last ``@`` hidden: credentials holding ``/``, ``?`` or ``#``.

    Such a URL does not parse as meant (``http://user:pa/ss@host`` reads as the
    host ``user`` with the port ``pa``), so no part of what precedes the last
    ``@`` after the scheme is shown; query values and the fragment after it are
    hidden as usual.
    """
    scheme, sep, rest = ("", "", url) if bare else url.partition("://")
    host_part = rest.rpartition("@")[2]
    tail, hash_, _ = host_part.partition("#")
    base, question, query = tail.partition("?")
    shown = base + (question + redact_query(query) if question else "") + ("#***" if hash_ else "")
    return f"{scheme}{sep}***@{shown}"


def redact_query(query: str) -> str:
    """A query string with every value replaced by ``***`` (keys kept, a bare item hidden whole)."""
    if not query:
        return query
    items = []
    for item in query.split("&"):
        key, sep, _ = item.partition("=")
        items.append(f"{key}=***" if sep else ("***" if item else item))
    return "&".join(items)


def redact_target(target: str) -> str:
    """An HTTP request target (``/ws?token=abc``) with its query values hidden."""
    path, sep, query = target.partition("?")
    return path + sep + redact_query(query) if sep else target


def _hidden_parts(url: str) -> list[str]:
    """For a URL `hide_url` hid (or one below it): what of it to scrub from text its server sends.

    The hidden ``host[:port]/path`` and ``host[:port]`` always; the bare host
    unless it is local (``localhost``, a loopback or private address: no
    capability in it, and common in any text); the path when it is long
    enough not to stand for a common word (8 characters or more).
    """
    key = _hidden_key(url) if _HIDDEN else None
    if key is None:
        return []
    for hidden in list(_HIDDEN):
        if key == hidden or key.startswith(hidden + "/"):
            netloc, slash, path = hidden.partition("/")
            host = netloc if netloc.endswith("]") else netloc.rpartition(":")[0] or netloc
            parts = [hidden, netloc]
            if not is_local_host(host):
                parts.append(host.strip("[]"))
            if len(path) >= 7:  # with its "/": 8 characters
                parts.append(slash + path)
            return parts
    return []


def url_secrets(url: str) -> list[str]:
    """The secrets a URL carries, to scrub from text a server sent back: its password and query values.

    Each as written and percent-decoded, and the credentials as HTTP Basic
    sends them (base64 of ``user:password``); ``[]`` for a URL without any (or
    one that does not parse).  For a URL `hide_url` hid (a cloud sandbox's,
    a capability as a whole), also its host and path: a server that echoes its
    own address in an error shows ``<hidden>`` there too.
    """
    if not url:
        return []
    hidden = _hidden_parts(url)
    if hidden:
        return [*hidden, *(s for s in _plain_secrets(url) if s not in hidden)]
    return _plain_secrets(url)


def _plain_secrets(url: str) -> list[str]:
    """`url_secrets` without what `hide_url` adds: the password, Basic credentials, query values, fragment."""
    try:
        parts = urlsplit(url if "://" in url else "//" + url)
        password = parts.password
    except ValueError:
        return []
    found = [password] if password else []
    if parts.username is not None or password is not None:  # what HTTP Basic sends for them
        pair = f"{unquote(parts.username or '')}:{unquote(password or '')}"
        found.append(base64.b64encode(pair.encode("utf-8")).decode("ascii"))
    for item in parts.query.split("&"):
        key, sep, value = item.partition("=")
        found.append(value if sep else key)
    found += [parts.fragment]
    return [s for v in found if v for s in {v, unquote(v), unquote_plus(v)}]


_SPACE_ID = re.compile(r"^[^/\s]+/[^/\s]+$")


def space_subdomain(repo_id: str) -> str:
    """Map a Space id ``owner/name`` to its subdomain, as OpenEnv 0.10 does.

    Lower-cases and replaces every character outside ``[a-z0-9]`` with ``-``:
    ``"Org/My.Space_v2"`` → ``"org-my-space-v2"``.
    """
    if not isinstance(repo_id, str) or not _SPACE_ID.match(repo_id.strip()):
        raise InvalidURL(f"not a Hugging Face Space id: {repo_id!r}; expected 'owner/name'")
    return re.sub(r"[^a-z0-9]", "-", repo_id.strip().lower())


def space_url(repo_id: str) -> str:
    """The hosted URL of a Space: ``https://<subdomain>.hf.space``."""
    return f"https://{space_subdomain(repo_id)}.hf.space"


def space_image(repo_id: str, tag: str = "latest", registry: str = DEFAULT_SPACE_REGISTRY) -> str:
    """The Docker image of a Space: ``<registry>/<subdomain>:<tag>``."""
    return f"{registry.rstrip('/')}/{space_subdomain(repo_id)}:{tag}"


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` (and its part after a scheme such as ``Bearer``) hidden."""
    parts: set[str] = set()
    for secret in secrets:
        for part in (secret, secret.strip(), secret.strip().rpartition(" ")[2]):
            if len(part) >= 4:
                parts.update((part, repr(part)[1:-1]))  # as is, and as a library's repr() quotes it
    for part in sorted(parts, key=len, reverse=True):
        text = text.replace(part, "<hidden>")
    return text

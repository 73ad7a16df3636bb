"""What the commands share: output, JSON options, the target, the schema fetch."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

_OBS_LIMIT = 160
#: ``--capacity-timeout``'s default: long enough for a one-session server to free the slot of the
#: command run just before, short enough that a slot held by somebody else is reported soon.
_CAPACITY_TIMEOUT = 10.0
#: the option that sets the wait, as the messages name it
_CAPACITY_OPTION = "--capacity-timeout"
T = TypeVar("T")


class _UsageError(Exception):
    """A bad command line (exit status 2)."""


@contextlib.contextmanager
def ctrl_c_never_lost() -> Iterator[None]:
    """Within the block, a Ctrl-C that Python would lose is delivered again.

    SIGINT raises ``KeyboardInterrupt`` in the main thread at its next bytecode.  When that
    bytecode belongs to a finalizer the garbage collector runs (a weakref callback, a
    ``__del__``), Python cannot raise it there: it prints "Exception ignored in ...", a traceback
    and ``KeyboardInterrupt`` on stderr, and the command goes on as if nothing was pressed.  Here
    nothing is printed, and a helper thread sends SIGINT to the main thread again (from outside:
    sent from the hook, it would land in the hook), as a user would press Ctrl-C again; one lost
    again is sent again.  One still on its way when the block ends is raised as it ends (SIGINT is
    held back while the helper is stopped).  Other unraisable exceptions go to the previous hook.
    Only in the main thread (the one SIGINT interrupts) and where threads can be signalled (POSIX);
    elsewhere the block runs as is.
    """
    import signal
    import threading

    main = threading.main_thread()
    if threading.current_thread() is not main or not hasattr(signal, "pthread_kill") or main.ident is None:
        yield
        return
    ident = main.ident
    read_end, write_end = os.pipe()  # the hook only writes a byte: no lock a finalizer could already hold
    os.set_blocking(write_end, False)
    in_hook = [False]  # an interrupt raised inside the hook itself would be lost for good
    closed = [False]

    def send_again() -> None:
        try:
            while os.read(read_end, 1):  # b"" once the block ended and the write end is closed
                deadline = time.monotonic() + 1.0
                while in_hook[0] and time.monotonic() < deadline:  # (its write releases the GIL)
                    time.sleep(0.001)
                signal.pthread_kill(ident, signal.SIGINT)  # a signal: it also ends a blocking wait there
        finally:
            os.close(read_end)

    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if closed[0] or not isinstance(unraisable.exc_value, KeyboardInterrupt):
            previous(unraisable)
            return
        in_hook[0] = True
        try:
            os.write(write_end, b"!")
        except OSError:  # a full pipe: one is on its way already
            pass
        except KeyboardInterrupt:  # one more, landed right here: lost too, so sent again as well
            with contextlib.suppress(OSError):
                os.write(write_end, b"!")
        finally:
            in_hook[0] = False

    sender = threading.Thread(target=send_again, name="openenv-ctrl-c", daemon=True)
    sender.start()
    sys.unraisablehook = hook
    try:
        yield
    finally:
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # what is sent now waits
        try:
            closed[0] = True
            if sys.unraisablehook is hook:  # (not another hook installed meanwhile)
                sys.unraisablehook = previous
            os.close(write_end)
            sender.join()  # it sends what is left, then ends
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a Ctrl-C sent meanwhile is raised here


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value


def _num(value: Any) -> str:
    """A reward as people write it (``0.7``, not ``0.7000000000000001``)."""
    from openenv._core.cli import compact_json

    return compact_json(value)


def _short(value: Any, limit: int = _OBS_LIMIT) -> str:
    """Compact JSON for a human line (floats rounded, cut at ``limit`` characters)."""
    from openenv._core.cli import compact

    text = json.dumps(compact(_jsonable(value)), default=str, ensure_ascii=False)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 3]}... ({len(text)} chars)"


#: An example value of each JSON option, for the hint of a value that is not valid JSON.
_EXAMPLES = {
    "--action": '{"message": "hi"}',
    "--reset-kwargs": '{"seed": 1}',
    "--args": '{"a": 2, "b": 40}',
}


def _load_json(text: str, option: str) -> Any:
    """The JSON of an option value, or of the file named by ``@path``."""
    source = text
    if text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise _UsageError(f"{option} {source}: cannot read {text[1:]!r}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        shown = source if len(source) <= 80 else source[:77] + "..."
        raise _UsageError(
            f"{option} {shown!r} is not valid JSON ({exc}); write an object, "
            f"e.g. {option} '{_EXAMPLES.get(option, '{}')}'"
        ) from None


def _load_object(text: str, option: str) -> dict[str, Any]:
    value = _load_json(text, option)
    if not isinstance(value, dict):
        raise _UsageError(f"{option} must be a JSON object ({{...}}), not {type(value).__name__}: {text[:80]!r}")
    return value


class _Out:
    """Where ``run`` reports: short human lines, or one JSON object per line (``--json``)."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    def note(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def record(self, record: dict[str, Any], human: str) -> None:
        if self.as_json:
            print(json.dumps(record, default=str, ensure_ascii=False), flush=True)
        else:
            print(human, flush=True)

    def error(self, exc: BaseException, where: str = "") -> None:
        message = f"{where}{exc}"
        if self.as_json:
            record = {"type": "error", "error": type(exc).__name__, "message": message}
            print(json.dumps(record, default=str, ensure_ascii=False), flush=True)
        print(f"error: {message}", file=sys.stderr, flush=True)


def _resolve(args: argparse.Namespace) -> Any:
    """What ``args.target`` names (`openenv._core.targets`), checked before anything starts.

    Raises:
        _UsageError: a target that names nothing (``htp://host``, a missing
            directory, ``my-env`` without a tag) or a directory that is not an
            OpenEnv environment: bad usage, exit status 2.
    """
    from openenv._blocking.sources import classify_source, is_environment_dir
    from openenv._core.errors import CheckoutNotRunnable, InvalidURL
    from openenv._core.targets import check_checkout

    try:
        where = classify_source(args.target)
        if where.kind == "checkout":
            check_checkout(
                where.target,
                is_environment=is_environment_dir(where.target),
                command_given=getattr(args, "command", None) is not None,
            )
    except (InvalidURL, CheckoutNotRunnable) as exc:
        raise _UsageError(str(exc)) from None
    return where


def _server_command(args: argparse.Namespace) -> list[str] | None:
    import shlex

    text = getattr(args, "command", None)
    if text is None:
        return None
    try:
        command = shlex.split(text)
    except ValueError as exc:
        raise _UsageError(f"--command {text!r}: {exc}") from None
    if not command:
        raise _UsageError("--command needs a command, e.g. --command 'python -m uvicorn server.app:app --fd {fd}'")
    return command


class _CapacityWait:
    """Retries what a server at capacity refused, for ``--capacity-timeout`` seconds in all.

    A server that serves one session at a time (OpenEnv's default,
    ``MAX_CONCURRENT_ENVS=1``) frees a client's slot just after that client
    closes, so a second command started right after the first one can be
    refused ``CAPACITY_REACHED``; another client may also hold the slot for a
    while. ``wait(call)`` returns ``call()``, retrying it with backoff while it
    raises `CapacityReached` (our server refuses the handshake; OpenEnv's
    servers accept, then refuse the first call, and the same client reconnects
    on the retry). One budget for the whole command, started at the first
    refusal; one line on stderr says the command is waiting. The schedule,
    the budget and the messages are the core's (`openenv._core.capacity`, as
    for the pool and ``environment_factory``); this only sleeps.
    """

    def __init__(self, args: argparse.Namespace, out: _Out) -> None:
        self.timeout: float = getattr(args, "capacity_timeout", 0.0)
        self.out = out
        self._retry: Any = None  # the core's CapacityRetry, from the first refusal on

    def __call__(self, call: Callable[[], T]) -> T:
        from openenv._core.capacity import CapacityWait, waiting_note
        from openenv._core.errors import CapacityReached

        while True:
            try:
                return call()
            except CapacityReached as exc:
                now = time.monotonic()
                if self._retry is None:
                    self._retry = CapacityWait(self.timeout, now, option=_CAPACITY_OPTION).retry()
                    if self.timeout > 0:
                        self.out.note(waiting_note(exc, self.timeout, option=_CAPACITY_OPTION))
                delay = self._retry.after(exc, now)
                if delay is None:
                    final = self._retry.final(exc, remedy="")  # the hint names the remedies
                    if final is exc:
                        raise
                    raise final from None
                time.sleep(delay)


@contextlib.contextmanager
def _session(
    args: argparse.Namespace, out: _Out, wait: _CapacityWait | None = None, *, connect: bool = True
) -> Iterator[Any]:
    """A connected blocking client for ``args.target`` (an in-process echo server when it is ``None``).

    Every target goes through ``Env.from_env``, so the command line reads it by
    the rules every constructor uses (`openenv._core.targets`). For a server
    URL, ``wait`` retries a connection refused at capacity (a started server
    is this command's own: nothing else can fill it), and ``connect=False``
    gives a client that opens no session (for what reads only HTTP, such as
    ``GET /schema``).
    """
    from openenv.sync import Env

    server = None
    try:
        target = args.target
        where = None
        if target is None:
            from openenv.server import EnvServer

            if getattr(args, "demo", "echo") == "tools":  # `tools` without a target: the demo that has tools
                from openenv.server.tools_demo import ToolsDemoEnvironment

                server = EnvServer(ToolsDemoEnvironment, host="127.0.0.1", port=0).start()
                out.note(f"started an in-process server of the built-in tool environment on {server.url}")
            else:
                from openenv.server.echo import EchoEnvironment

                server = EnvServer(EchoEnvironment, host="127.0.0.1", port=0).start()
                out.note(f"started an in-process echo server on {server.url}")
            target = server.url
        else:
            where = _resolve(args)
        opened = time.perf_counter()
        if where is not None and where.kind == "checkout":
            env = Env.from_env(
                target,
                ready_timeout=args.ready_timeout,
                install=args.install,
                command=_server_command(args),
            )
        elif where is not None and where.kind == "url" and not connect:
            from openenv._blocking.sources import hosted_headers

            env = Env(where.target, headers=hosted_headers(where.target, None))
            try:  # never connected: what reads only HTTP needs no session (nor a free slot)
                yield env
            finally:
                env.close()
            return
        elif where is not None and where.kind == "url" and wait is not None:
            env = wait(lambda: Env.from_env(target, ready_timeout=args.ready_timeout))
        else:
            env = Env.from_env(target, ready_timeout=args.ready_timeout)
        with env:
            if args.target is not None and env.provider is not None:
                out.note(f"started {target} in {time.perf_counter() - opened:.2f} s: {env.base_url}")
            yield env
    finally:
        if server is not None:
            server.stop()


def _status(exc: BaseException) -> int:
    """The exit status of an error: 2 for a bad option or target (bad usage), else 1."""
    from openenv._core.errors import InvalidOption, InvalidURL

    return 2 if isinstance(exc, (InvalidOption, InvalidURL)) else 1


def _hint(exc: BaseException, args: argparse.Namespace) -> str | None:
    """A command-line remedy for an error whose message names Python options."""
    from openenv._core.cli import plural
    from openenv._core.errors import CapacityReached, CheckoutNotRunnable

    if isinstance(exc, CapacityReached):
        most = exc.max_sessions
        held = f"serves {plural(most, 'session')} at a time" if most is not None else "is full"
        return (
            f"hint: the server {held}, all taken by other clients: wait for one to finish "
            f"(--capacity-timeout SECONDS waits longer; now {getattr(args, 'capacity_timeout', 0.0):g}), "
            "or start the server with more sessions (MAX_CONCURRENT_ENVS=N, or serve --max-sessions N)"
        )
    if isinstance(exc, CheckoutNotRunnable):
        return (
            f"hint: on the command line, --install creates the checkout's .venv and installs it there "
            f"({_prog()} {args.command_name}{_target_words(args)} --install), and --command 'CMD' starts the "
            "server your own way ({fd}, {port} and {host} are filled in, e.g. "
            "--command 'python -m uvicorn server.app:app --fd {fd}')"
        )
    return None


def _fetch_schema(env: Any) -> dict[str, Any]:
    """The ``GET /schema`` object of ``env``'s server, with the client's own options (``verify``, headers, timeouts).

    Raises:
        ConnectError: the request failed.
        ProtocolError: the answer was not a JSON object.
    """
    from openenv._core.errors import ProtocolError
    from openenv._core.urls import redact_url
    from openenv._sync.http import get_json

    schema = get_json(env.base_url, "/schema", env.options)
    if not isinstance(schema, dict):
        raise ProtocolError(f"{redact_url(env.base_url)}/schema did not answer a JSON object")
    return schema


def _target_words(args: argparse.Namespace) -> str:
    import shlex

    return "" if args.target is None else " " + shlex.quote(args.target)


def _positive_or_zero(text: str) -> int:
    """A whole number >= 0 (``--steps``, ``--port``), with a readable error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


def _port(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535 (``--port``), with a readable error."""
    value = _positive_or_zero(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is 0 to 65535 (0: any free port), not {value}")
    return value


def _integer(text: str) -> int:
    """A whole number (``--seed``, ``--max-sessions``), with a readable error."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None


def _seconds(text: str) -> float:
    """A number of seconds (``--ready-timeout``, ``--idle-timeout``), with a readable error."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, not {text!r}") from None
    if value != value or value < 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, not {text!r}")
    return value


_TARGET_HELP = (
    "a server URL (http://..., https://...), a Docker image with its tag (name:tag), a Hugging Face Space id "
    "(owner/name) or a local environment checkout directory (./path); prefix docker: or space: to force the "
    "kind. Default: the built-in echo environment on an in-process server on 127.0.0.1"
)


def _prog() -> str:
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return name if name.startswith("openenv-twin") else "python -m openenv"


def _add_target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", default=None, metavar="TARGET", help=_TARGET_HELP)
    parser.add_argument(
        "--install",
        action="store_true",
        help="for a checkout without a .venv: create one in the checkout and install the checkout there first",
    )
    parser.add_argument(
        "--command",
        metavar="CMD",
        default=None,
        help="for a checkout: the command that starts its server, instead of the interpreter openenv picks "
        "({fd}, {port} and {host} are filled in; e.g. 'python -m uvicorn server.app:app --fd {fd}')",
    )
    parser.add_argument(
        "--ready-timeout",
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="how long a started server may take to become healthy (default: 60)",
    )
    parser.add_argument(
        "--capacity-timeout",
        type=_seconds,
        default=_CAPACITY_TIMEOUT,
        metavar="SECONDS",
        help="how long to wait for a session while a server URL is at capacity (CAPACITY_REACHED: another "
        f"client holds its sessions, or is just closing one); 0 fails at once (default: {_CAPACITY_TIMEOUT:g})",
    )

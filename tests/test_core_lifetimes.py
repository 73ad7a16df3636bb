"""Sans-IO rules: the interpreter choice for a checkout, /proc/<pid>/stat, registry records, prune verdicts."""

from __future__ import annotations

import pytest

from openenv._core.checkout import (
    CURRENT,
    INSTALL,
    PROBE,
    UV,
    VENV,
    CheckoutFacts,
    Plan,
    choose_interpreter,
    uvicorn_command,
)
from openenv._core.errors import CheckoutNotRunnable, ProviderError
from openenv._core.lifetimes import (
    FORGET,
    KEEP,
    KILL,
    ProcessRecord,
    decode_record,
    encode_message,
    encode_record,
    parse_message,
    parse_start_time,
    prune_verdict,
)

BASE = CheckoutFacts(directory="/co", app="server.app:app", python="/usr/bin/python3")


def test_the_checkouts_venv_comes_first() -> None:
    facts = CheckoutFacts(
        "/co", "server.app:app", "/py", venv_python="/co/.venv/bin/python", uv="/bin/uv", install=True
    )
    assert choose_interpreter(facts) == Plan(VENV, ("/co/.venv/bin/python",))


def test_install_comes_before_uv_and_the_current_interpreter() -> None:
    facts = CheckoutFacts("/co", "server.app:app", "/py", uv="/bin/uv", install=True)
    assert choose_interpreter(facts) == Plan(INSTALL, ("/co/.venv/bin/python",))


def test_uv_comes_before_the_current_interpreter() -> None:
    facts = CheckoutFacts("/co", "server.app:app", "/py", uv="/bin/uv", probed=True)
    assert choose_interpreter(facts) == Plan(UV, ("/bin/uv", "run", "--project", "/co", "python"))


def test_the_current_interpreter_is_probed_last() -> None:
    assert choose_interpreter(BASE).kind == PROBE
    ok = CheckoutFacts("/co", "server.app:app", "/py", probed=True)
    assert choose_interpreter(ok) == Plan(CURRENT, ("/py",))


def test_nothing_runs_it_names_every_remedy() -> None:
    facts = CheckoutFacts("/my co", "server.app:app", "/py", probed=True, probe_error="ModuleNotFoundError: x")
    with pytest.raises(CheckoutNotRunnable) as info:
        choose_interpreter(facts)
    message = str(info.value)
    assert isinstance(info.value, ProviderError)
    assert "python -m venv '/my co/.venv' && '/my co/.venv'/bin/pip install -e '/my co'" in message
    assert "pip install uv" in message and "install=True" in message and "command=[...]" in message
    assert "ModuleNotFoundError: x" in message
    assert info.value.probe_error == "ModuleNotFoundError: x" and info.value.directory == "/my co"


def test_the_server_command_takes_the_socket() -> None:
    assert uvicorn_command(Plan(VENV, ("/v/python",)), "server.app:app") == [
        "/v/python", "-m", "uvicorn", "server.app:app", "--fd", "{fd}",
    ]  # fmt: skip
    with pytest.raises(ValueError):
        uvicorn_command(Plan(PROBE), "a:b")


def test_start_time_is_field_22_even_with_parentheses_in_the_name() -> None:
    fields = " ".join(str(n) for n in range(3, 53))  # field n holds n
    assert parse_start_time(f"123 (a) b (c) {fields}") == 22
    assert parse_start_time("123 (x) S 1 2") is None
    assert parse_start_time("garbage") is None


def test_records_round_trip_and_junk_is_refused() -> None:
    record = ProcessRecord(1, 2, 3, 4, "boot", ("python", "-m", "x"), 5.0)
    assert decode_record(encode_record(record)) == record
    assert decode_record("[]") is None
    assert decode_record('{"pid": -1, "start_time": 2, "owner_pid": 3, "owner_start_time": 4}') is None
    assert decode_record("{") is None


RECORD = ProcessRecord(pid=10, start_time=100, owner_pid=20, owner_start_time=200, boot_id="b")


@pytest.mark.parametrize(
    ("now", "owner_now", "boot", "everything", "verdict"),
    [
        (100, 200, "b", False, KEEP),  # owner alive
        (100, 200, "b", True, KILL),  # --all
        (100, None, "b", False, KILL),  # owner gone
        (100, 999, "b", False, KILL),  # owner PID reused: owner gone
        (None, None, "b", True, FORGET),  # server gone
        (101, None, "b", True, FORGET),  # server PID reused: never killed
        (100, None, "other", True, FORGET),  # rebooted
    ],
)
def test_prune_verdicts(now: int | None, owner_now: int | None, boot: str, everything: bool, verdict: str) -> None:
    result = prune_verdict(
        RECORD, start_time_now=now, owner_start_time_now=owner_now, boot_id_now=boot, everything=everything
    )
    assert result == verdict


def test_reaper_messages() -> None:
    assert parse_message(encode_message("+", "p", 12, 34)) == ("+", "p", "12", "34")
    assert parse_message(encode_message("-", "c", "openenv-x-1-abc", "sess")) == ("-", "c", "openenv-x-1-abc", "sess")
    assert parse_message(b"+p x 1\n") is None
    assert parse_message(b"hello\n") is None
    with pytest.raises(ValueError):
        encode_message("+", "c", "a b", "s")

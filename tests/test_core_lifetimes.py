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
    ALIVE,
    DEAD,
    FOREIGN,
    FORGET,
    KEEP,
    KILL,
    LABEL_BOOT_ID,
    LABEL_HOST,
    LABEL_PID_NAMESPACE,
    LABEL_PID_START,
    REMOVE,
    Here,
    Identity,
    ProcessRecord,
    container_verdict,
    decode_record,
    encode_message,
    encode_record,
    identity_from_labels,
    identity_labels,
    owner_state,
    parse_message,
    parse_start_time,
    prune_verdict,
    shorten_command,
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
    assert parse_message(encode_message("+", "p", 12, 34)) == ("+", "p", "12", "34", "")
    assert parse_message(encode_message("-", "c", "openenv-x-1-abc", "sess")) == (
        "-", "c", "openenv-x-1-abc", "sess", "",
    )  # fmt: skip
    assert parse_message(encode_message("+", "c", "n", "s", "reg:5000/a/b:1")) == ("+", "c", "n", "s", "reg:5000/a/b:1")
    assert parse_message(b"+p 1 2 3\n") is None  # only a container names an image
    assert parse_message(b"+p x 1\n") is None
    assert parse_message(b"hello\n") is None
    with pytest.raises(ValueError):
        encode_message("+", "c", "a b", "s")


# --------------------------------------------------------------------------- owners and containers

HERE = Here(host="h", boot_id="b", pid_namespace="pid:[4026531836]")
OWNER = Identity(host="h", boot_id="b", pid_namespace="pid:[4026531836]", pid=42, start_time=1000)


@pytest.mark.parametrize(
    ("owner", "start_now", "state"),
    [
        (OWNER, 1000, ALIVE),
        (OWNER, None, DEAD),
        (OWNER, 1001, DEAD),  # the PID was reused
        (Identity("other", "b", OWNER.pid_namespace, 42, 1000), 1000, FOREIGN),
        (Identity("h", "other-boot", OWNER.pid_namespace, 42, 1000), None, FOREIGN),
        (Identity("h", "b", "pid:[4026532999]", 42, 1000), None, FOREIGN),  # another PID namespace
    ],
)
def test_one_liveness_rule(owner: Identity, start_now: int | None, state: str) -> None:
    assert owner_state(owner, HERE, start_now)[0] == state


def test_unknown_facts_here_never_prove_anything() -> None:
    assert owner_state(OWNER, Here("h", "b", ""), None)[0] == FOREIGN
    assert owner_state(OWNER, Here("h", "", OWNER.pid_namespace), None)[0] == FOREIGN


def test_identity_labels_round_trip_and_partial_ones_are_no_identity() -> None:
    labels = identity_labels(OWNER)
    assert identity_from_labels(labels) == OWNER
    for missing in (LABEL_HOST, LABEL_BOOT_ID, LABEL_PID_NAMESPACE, LABEL_PID_START, "org.openenv.pid"):
        assert identity_from_labels({k: v for k, v in labels.items() if k != missing}) is None
    assert identity_from_labels({**labels, LABEL_PID_START: "soon"}) is None


MANAGED = {"org.openenv.managed": "1", "org.openenv.session": "s"}


@pytest.mark.parametrize(
    ("labels", "start_now", "everything", "verdict"),
    [
        ({**MANAGED, **identity_labels(OWNER)}, None, False, REMOVE),  # its owner is gone
        ({**MANAGED, **identity_labels(OWNER)}, 1001, False, REMOVE),  # PID reused
        ({**MANAGED, **identity_labels(OWNER)}, 1000, False, KEEP),
        ({**MANAGED, **identity_labels(OWNER)}, 1000, True, REMOVE),
        # a look-alike: managed=1 and a dead PID, nothing else
        ({**MANAGED, "org.openenv.pid": "42"}, None, False, FOREIGN),
        ({**MANAGED, "org.openenv.pid": "42"}, None, True, REMOVE),
        ({**MANAGED, **identity_labels(OWNER), LABEL_HOST: "ci-runner-7"}, None, False, FOREIGN),
        ({**MANAGED, **identity_labels(OWNER), LABEL_BOOT_ID: "x"}, None, False, FOREIGN),
        ({**MANAGED, **identity_labels(OWNER), LABEL_PID_NAMESPACE: "pid:[1]"}, None, False, FOREIGN),
        ({**MANAGED, **identity_labels(OWNER), LABEL_PID_NAMESPACE: "pid:[1]"}, None, True, REMOVE),
    ],
)
def test_container_verdicts(labels: dict[str, str], start_now: int | None, everything: bool, verdict: str) -> None:
    found, why = container_verdict(labels, here=HERE, start_time_now=start_now, everything=everything)
    assert found == verdict and why


@pytest.mark.parametrize("owner_now", [OWNER.start_time, None, OWNER.start_time + 1], ids=["alive", "gone", "reused"])
@pytest.mark.parametrize("owner_host", ["h", "ci-runner-7"])
def test_processes_and_containers_share_one_liveness_rule(owner_now: int | None, owner_host: str) -> None:
    """The same owner facts give the same judgement for a local server's record and for a container."""
    owner = Identity(owner_host, OWNER.boot_id, OWNER.pid_namespace, OWNER.pid, OWNER.start_time)
    record = ProcessRecord(
        10, 100, owner.pid, owner.start_time, "b", host=owner.host, pid_namespace=owner.pid_namespace
    )
    labels = {**MANAGED, **identity_labels(owner)}
    state = owner_state(owner, HERE, owner_now)[0]
    process = prune_verdict(record, start_time_now=100, owner_start_time_now=owner_now, boot_id_now="b", here=HERE)
    container = container_verdict(labels, here=HERE, start_time_now=owner_now)[0]
    assert {ALIVE: (KEEP, KEEP), DEAD: (KILL, REMOVE), FOREIGN: (FOREIGN, FOREIGN)}[state] == (process, container)
    # the server itself is judged by the same rule: a reused PID is never killed
    reused = prune_verdict(record, start_time_now=101, owner_start_time_now=None, boot_id_now="b", here=HERE)
    assert reused == (FORGET if owner_host == "h" else FOREIGN)


def test_a_record_of_another_pid_namespace_is_never_acted_on() -> None:
    record = ProcessRecord(10, 100, 20, 200, "b", host="h", pid_namespace="pid:[1]")
    for everything in (False, True):
        verdict = prune_verdict(
            record, start_time_now=100, owner_start_time_now=None, boot_id_now="b", everything=everything, here=HERE
        )
        assert verdict == FOREIGN
    same = ProcessRecord(10, 100, 20, 200, "b", host="h", pid_namespace=HERE.pid_namespace)
    verdict = prune_verdict(same, start_time_now=100, owner_start_time_now=None, boot_id_now="b", here=HERE)
    assert verdict == KILL
    old = ProcessRecord(10, 100, 20, 200, "b")  # written before records named their namespace
    assert prune_verdict(old, start_time_now=100, owner_start_time_now=None, boot_id_now="b", here=HERE) == KILL


def test_command_lines_are_cut_between_words() -> None:
    command = ["/usr/bin/python3", "-m", "openenv", "serve", "echo", "--host", "127.0.0.1", "--port", "34823"]
    short = shorten_command(command, 50)
    assert len(short) <= 50 and short.endswith(" …")
    assert " ".join(command).startswith(short[:-2])
    assert short[:-2].split(" ")[-1] in command  # never half a word or number
    assert shorten_command(["a", "b"], 50) == "a b"
    assert shorten_command(["x" * 80, "y"], 50) == "x" * 80 + " …"  # a long first word is shown whole

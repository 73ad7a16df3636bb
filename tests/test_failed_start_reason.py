"""A failed checkout or server start quotes the exception the child raised, not a banner line (issue #31).

OpenEnv's textarena checkout, offline, printed NLTK's download banner (a line of
asterisks) and then raised ``LookupError``; the error quoted the asterisks.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from openenv._blocking.checkout import probe_current
from openenv._core.errors import ContainerExited, exception_line, last_meaningful_line
from openenv.sync import CheckoutNotRunnable, Env, ProviderError

ENVS = Path(__file__).resolve().parent / "openenv_envs"
STARS = "*" * 70

#: what NLTK prints when a corpus is missing: a banner on stdout, then a LookupError whose message is boxed
BANNER_THEN_RAISE = textwrap.dedent(
    f'''
    import sys

    print("{STARS}", file=sys.stderr)
    print("  NLTK is loading its corpora", file=sys.stderr)
    print("{STARS}", file=sys.stderr)
    raise LookupError(
        "\\n{STARS}\\n  Resource words not found.\\n  Please use the NLTK Downloader to obtain the resource:\\n\\n"
        "  >>> import nltk\\n  >>> nltk.download('words')\\n{STARS}\\n"
    )
    '''
)


def test_exception_line_reads_the_last_traceback() -> None:
    nltk = f"""{STARS}
Traceback (most recent call last):
  File "server/app.py", line 3, in <module>
    words.ensure_loaded()
    ^^^^^^^^^^^^^^^^^^^^^
LookupError:{" "}
{STARS}
  Resource words not found.
  Please use the NLTK Downloader to obtain the resource:
{STARS}
"""
    assert exception_line(nltk) == "LookupError: Resource words not found."
    chained = (
        "Traceback (most recent call last):\n  File 'a'\nKeyError: 'x'\n\nDuring handling of the above exception, "
        "another exception occurred:\n\nTraceback (most recent call last):\n  File 'b'\n"
        "pkg.errors.ConfigError: no settings file\n"
    )
    assert exception_line(chained) == "pkg.errors.ConfigError: no settings file"
    assert exception_line("Traceback (most recent call last):\n  File 'c'\nKeyboardInterrupt\n") == "KeyboardInterrupt"
    assert exception_line(f"{STARS}\nplain output\n{STARS}\n") == ""
    assert last_meaningful_line(f"started\n{STARS}\nfatal: no model\n{STARS}\n") == "fatal: no model"
    exited = ContainerExited("c", 1, nltk)
    assert str(exited).startswith(
        "container c exited before it became ready (exit code 1): it raised LookupError: Resource words not found."
    )


def _banner_checkout(tmp_path: Path) -> Path:
    checkout = tmp_path / "banner_env"
    shutil.copytree(ENVS / "gated_echo", checkout)
    (checkout / "server" / "app.py").write_text(BANNER_THEN_RAISE, encoding="utf-8")
    return checkout


def test_a_checkout_whose_import_prints_a_banner_then_raises_quotes_the_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("uvicorn")  # the probe imports uvicorn first, as the server would
    checkout = _banner_checkout(tmp_path)
    assert probe_current(str(checkout), "server.app:app") == "LookupError: Resource words not found."
    monkeypatch.setenv("PATH", str(tmp_path / "no-uv-here"))  # the current interpreter is the last resort
    with pytest.raises(CheckoutNotRunnable) as info:
        Env.from_env(str(checkout), ready_timeout=60)
    assert info.value.probe_error == "LookupError: Resource words not found."
    assert "LookupError: Resource words not found." in str(info.value) and STARS not in str(info.value)


def test_a_server_process_that_prints_a_banner_then_raises_quotes_the_exception(tmp_path: Path) -> None:
    checkout = _banner_checkout(tmp_path)
    script = tmp_path / "start.py"
    script.write_text(BANNER_THEN_RAISE, encoding="utf-8")
    with pytest.raises(ProviderError) as info:
        Env.from_env(str(checkout), command=[sys.executable, str(script)], ready_timeout=60)
    first = str(info.value).splitlines()[0]
    assert first.endswith(": it raised LookupError: Resource words not found.; last output lines:"), first

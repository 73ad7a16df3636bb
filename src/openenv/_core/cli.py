"""The command line's decisions, without IO: which tool a bare ``run`` calls, what an error observation is,
how numbers and counts are written, and which command a typo meant.

``openenv._cli`` does the IO (argument parsing, the client, printing) and asks
these functions; ``tests/test_core_cli.py`` tests them without a server.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .defaults import NoDefault, default_value

__all__ = ["compact", "compact_json", "plural", "observation_error", "pick_tool", "did_you_mean"]


def compact(value: Any) -> Any:
    """``value`` with each float rounded to 10 significant digits (``0.7000000000000001`` → ``0.7``).

    For what people read (the human lines of ``run``); ``--json`` keeps the exact values.
    Containers are walked; ``nan`` and infinities are kept as they are.
    """
    if isinstance(value, float):
        return value if not math.isfinite(value) else float(f"{value:.10g}")
    if isinstance(value, Mapping):
        return {key: compact(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [compact(item) for item in value]
    return value


def compact_json(value: Any) -> str:
    """A number as people write it: ``None``, ``0.7`` (not ``0.7000000000000001``), ``1``, ``1e-12``."""
    if value is None:
        return "None"
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


def plural(count: int, word: str) -> str:
    """``"1 step"``, ``"2 steps"``, ``"0 steps"``."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def observation_error(observation: Any) -> str | None:
    """The error an observation reports, or ``None``.

    An MCP step observation (OpenEnv's ``CallToolObservation``) reports a failed
    call in its ``error`` field: a string, or ``{"error_type", "message"}``.
    Any other observation with a non-empty ``error`` is read the same way.
    """
    if not isinstance(observation, Mapping):
        return None
    error = observation.get("error")
    if not error:
        return None
    if isinstance(error, Mapping):
        message = error.get("message") or error.get("detail") or ""
        kind = error.get("error_type") or error.get("type") or error.get("code") or ""
        text = f"{kind}: {message}" if kind and message else str(message or kind or dict(error))
    else:
        text = str(error)
    tool = observation.get("tool_name")
    return f"tool {tool!r}: {text}" if isinstance(tool, str) and tool and tool not in text else text


def pick_tool(tools: Sequence[Any]) -> tuple[Any, dict[str, Any]] | None:
    """The tool a ``run`` without ``--action``/``--tool`` calls, and its arguments; ``None`` when none can be built.

    A tool without required parameters comes first; otherwise the first tool,
    in the server's order, whose arguments `default_value()` can build from
    its input schema.
    """
    ranked = sorted(tools, key=lambda tool: bool((tool.input_schema or {}).get("required")))
    for tool in ranked:
        try:
            arguments = default_value(tool.input_schema or {"type": "object"})
        except NoDefault:
            continue
        if isinstance(arguments, dict):
            return tool, arguments
    return None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'run'?)"`` for a near miss, else ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""

"""The mcp_guess environment's own client (openenv-core's ``MCPToolClient``).

async with MCPGuessEnv(base_url="http://127.0.0.1:8000") as env:
    await env.reset(seed=7)
    print(await env.call_tool("guess", number=50))   # "higher" / "lower" / "correct: ..."
"""

from __future__ import annotations

from typing import Any

from openenv.core.mcp_client import MCPToolClient

from .models import GuessState


class MCPGuessEnv(MCPToolClient):
    """Tools ``guess(number)`` and ``hint()``; ``state()`` is a :class:`GuessState`."""

    def _parse_state(self, payload: dict[str, Any]) -> GuessState:  # type: ignore[override]
        return GuessState.model_validate(payload)

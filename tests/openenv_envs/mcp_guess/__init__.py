"""Guess-the-number over MCP tools (OpenEnv layout)."""

from .client import MCPGuessEnv
from .models import HIGH, LOW, GuessObservation, GuessState

__all__ = ["MCPGuessEnv", "GuessObservation", "GuessState", "LOW", "HIGH"]

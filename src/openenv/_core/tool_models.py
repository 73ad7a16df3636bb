"""The tool models (pydantic): loaded only when tools are used, so importing the client stays light."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

__all__ = ["Tool", "ToolResult"]


class Tool(BaseModel):
    """One tool as listed by the server.

    ``input_schema`` is the JSON Schema of the tool's arguments; it is read
    from ``inputSchema`` (FastMCP 3, OpenEnv 0.10 servers) or ``input_schema``
    (FastMCP 4, OpenEnv's own tool model, step observations).  Other keys the
    server sends (``title``, ``annotations``, ``meta``, ...) are kept as extras.
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="allow", populate_by_name=True, frozen=True)

    name: str
    description: str | None = ""
    input_schema: dict[str, Any] = Field(
        default_factory=dict, validation_alias=AliasChoices("input_schema", "inputSchema")
    )
    output_schema: dict[str, Any] | None = Field(
        default=None, validation_alias=AliasChoices("output_schema", "outputSchema")
    )


class ToolResult(BaseModel):
    """The result of one tool call.

    Attributes:
        content: the MCP content items (``{"type": "text", "text": ...}``, ...).
        structured_content: the tool's structured output (``{"result": 5}``), if any.
        data: the tool's return value as the server decoded it (FastMCP's
            ``data``); falls back to ``structured_content["result"]`` and
            then to the single text content.
        is_error: whether the tool reported an error as its result (tools that
            *raise* give a [`ToolError`][openenv.sync.ToolError] instead).
        meta: the server's ``meta`` object, if any.
        reward: for calls made through the step loop (every call in
            simulation mode: a real step), the step's reward; ``None``
            otherwise (production mode).
        done: for calls made through the step loop, the step's done flag;
            ``False`` otherwise (production mode).
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="allow", populate_by_name=True)

    content: list[dict[str, Any]] = Field(default_factory=list)
    structured_content: Any | None = Field(
        default=None, validation_alias=AliasChoices("structured_content", "structuredContent")
    )
    data: Any = None
    is_error: bool = Field(default=False, validation_alias=AliasChoices("is_error", "isError"))
    meta: dict[str, Any] | None = Field(default=None, validation_alias=AliasChoices("meta", "_meta"))
    reward: float | None = None
    done: bool = False

    @property
    def texts(self) -> list[str]:
        """The ``text`` of every text content item, in order."""
        return [str(item.get("text", "")) for item in self.content if item.get("type") == "text"]

    @property
    def text(self) -> str:
        """All text content joined with newlines (``""`` when there is none)."""
        return "\n".join(self.texts)

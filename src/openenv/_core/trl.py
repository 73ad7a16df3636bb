"""The sans-IO half of ``environment_factory``: tools and schemas become Python signatures and docstrings.

TRL's ``GRPOTrainer(environment_factory=...)`` turns every public method of an
environment class into a function-calling tool, with the JSON Schema built by
``transformers.utils.get_json_schema`` from the method's type hints and the
``Args:`` section of its Google-style docstring.  This module builds, from an
MCP tool's ``input_schema`` (or an action's JSON Schema), a
`MethodSpec`: a method name, an `inspect.Signature` with real
annotations (``int``, ``str``, ``Literal[...]``, ``list[...]``, ``X | None``,
...) and a docstring that ``get_json_schema`` reads back as the same schema.
It also filters ``reset`` keyword arguments and renders observations and tool
results as text for the model.  Nothing here does IO or imports transformers.
"""

from __future__ import annotations

import inspect
import json
import keyword
import re
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Union

__all__ = [
    "Param",
    "MethodSpec",
    "RESERVED_METHODS",
    "DEFAULT_RESET_KEYS",
    "annotation_of",
    "method_spec",
    "plan_methods",
    "split_description",
    "method_name",
    "python_name",
    "step_spec",
    "bind_arguments",
    "reset_parameters",
    "filter_reset",
    "render_observation",
    "render_tool_result",
    "reset_text",
    "TEXT_FIELDS",
    "RESET_SEPARATOR",
    "EPISODE_OVER",
    "NO_LOOP",
    "other_loop_message",
    "pool_pickle_message",
    "render_pickle_message",
    "unpickled_unreachable_message",
]

#: Names the generated class uses itself (a tool with one of these names is renamed ``<name>_tool``).
RESERVED_METHODS = frozenset({"reset", "reward", "done", "get_reward", "close", "env", "tools", "base_url"})
#: What ``reset`` forwards when the server does not say which keywords its ``reset`` takes.
DEFAULT_RESET_KEYS = frozenset({"seed", "episode_id"})
#: What a tool answers once the episode is over (it does not reach the environment).
EPISODE_OVER = "The episode is over: no further actions are taken. Stop calling tools."

_SIMPLE: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}
_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "a list",
    "object": "an object",
}
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields)\s*:\s*$", re.IGNORECASE)
_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NOT_WORD = re.compile(r"\W")


@dataclass(frozen=True)
class Param:
    """One parameter of a generated method.

    Attributes:
        name: the Python parameter name (an identifier, never a keyword).
        wire: the argument's name in the tool's schema (sent to the server).
        annotation: the parameter's type hint.
        required: whether the schema requires it (else it defaults to ``default``).
        default: the default value (``None`` when the schema gives none).
        nullable: whether the schema accepts ``null`` (else ``None`` means: leave it out).
        description: the ``Args:`` text (one line).
    """

    name: str
    wire: str
    annotation: Any
    required: bool
    default: Any
    nullable: bool
    description: str


@dataclass(frozen=True)
class MethodSpec:
    """How one tool becomes one method: name, signature, annotations and docstring.

    Attributes:
        name: the method name (a public identifier).
        tool: the tool's name on the server (``None`` for the generated ``step`` tool).
        description: the main description (first part of the docstring).
        params: the parameters, required ones first.
        returns: the ``Returns:`` text.
    """

    name: str
    tool: str | None
    description: str
    params: tuple[Param, ...]
    returns: str = "The result, as text."
    _by_name: dict[str, Param] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_name.update({p.name: p for p in self.params})

    def parameters(self) -> list[inspect.Parameter]:
        """The method's parameters without ``self``."""
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        out = []
        for p in self.params:
            default = inspect.Parameter.empty if p.required else p.default
            out.append(inspect.Parameter(p.name, kind, default=default, annotation=p.annotation))
        return out

    def signature(self, *, with_self: bool = True) -> inspect.Signature:
        """The signature (``self`` first unless ``with_self=False``); it returns ``str``."""
        params = self.parameters()
        if with_self:
            params.insert(0, inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD))
        return inspect.Signature(params, return_annotation=str)

    def annotations(self) -> dict[str, Any]:
        """``__annotations__`` for the method: every parameter's hint, then ``return``."""
        out: dict[str, Any] = {p.name: p.annotation for p in self.params}
        out["return"] = str
        return out

    def docstring(self) -> str:
        """A Google-style docstring: description, ``Args:`` (one line each), ``Returns:``."""
        parts = [self.description]
        if self.params:
            lines = [f"    {p.name}: {p.description}" for p in self.params]
            parts.append("Args:\n" + "\n".join(lines))
        parts.append(f"Returns:\n    {self.returns}")
        return "\n\n".join(parts)

    def param(self, name: str) -> Param:
        """The parameter called ``name`` (its Python name)."""
        return self._by_name[name]


# ------------------------------------------------------------------ JSON Schema -> annotation


def _resolve(schema: Any, defs: Mapping[str, Any], seen: frozenset[str]) -> tuple[Any, frozenset[str]]:
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name in seen or not isinstance(defs.get(name), dict):
            return {}, seen  # recursive or unresolvable: anything
        extra = {k: v for k, v in schema.items() if k != "$ref"}
        seen = seen | {name}
        schema = {**defs[name], **extra}
    return schema, seen


def _union(members: Sequence[Any]) -> Any:
    unique: list[Any] = []
    for member in members:
        if member not in unique:
            unique.append(member)
    if not unique:
        return Any
    if Any in unique:
        return Any
    return unique[0] if len(unique) == 1 else Union[tuple(unique)]  # noqa: UP007 - built at run time


def _nullable(annotation: Any, nullable: bool) -> Any:
    return Optional[annotation] if nullable else annotation  # noqa: UP045 - built at run time


def annotation_of(schema: Any, defs: Mapping[str, Any] | None = None) -> tuple[Any, bool]:
    """The Python type hint for a JSON Schema, and whether it accepts ``null``.

    ``string``/``integer``/``number``/``boolean`` give ``str``/``int``/``float``/
    ``bool``; ``array`` gives ``list[<items>]``; ``object`` gives
    ``dict[str, Any]``; ``enum``/``const`` give ``Literal[...]``; ``anyOf``/
    ``oneOf``/type lists give unions; ``null`` among them makes the hint
    ``X | None``.  ``$ref`` into ``defs`` is followed; anything else is ``Any``.

    Returns:
        ``(annotation, nullable)``; ``annotation`` already includes ``| None`` when nullable.
    """
    base, nullable = _annotation(schema, dict(defs or {}), frozenset())
    return _nullable(base, nullable), nullable


def _annotation(schema: Any, defs: Mapping[str, Any], seen: frozenset[str]) -> tuple[Any, bool]:
    schema, seen = _resolve(schema, defs, seen)
    if not isinstance(schema, dict) or not schema:
        return Any, False
    if "const" in schema:
        if schema["const"] is None:
            return Any, True
        return Literal[schema["const"]], False
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        values = [value for value in enum if value is None or isinstance(value, (str, int, float, bool))]
        present = [value for value in values if value is not None]
        if present:
            return Literal[tuple(present)], None in values
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            members, nullable = [], False
            for option in options:
                resolved, _ = _resolve(option, defs, seen)
                if isinstance(resolved, dict) and resolved.get("type") == "null":
                    nullable = True
                    continue
                hint, inner_null = _annotation(option, defs, seen)
                members.append(hint)
                nullable = nullable or inner_null
            return _union(members), nullable
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1:
        return _annotation(all_of[0], defs, seen)
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        hints = [_annotation({**schema, "type": k}, defs, seen)[0] for k in kinds]
        return _union(hints), "null" in kind
    if kind in _SIMPLE:
        return _SIMPLE[kind], False
    if kind == "null":
        return Any, True
    if kind == "array":
        items = schema.get("items")
        item_hint, item_null = _annotation(items, defs, seen) if isinstance(items, dict) else (Any, False)
        return list[_nullable(item_hint, item_null)], False  # type: ignore[misc]
    if kind == "object" or "properties" in schema:
        return dict[str, Any], False
    return Any, False


def _type_word(schema: Any, defs: Mapping[str, Any]) -> str:
    schema, _ = _resolve(schema, defs, frozenset())
    if isinstance(schema, dict):
        if isinstance(schema.get("enum"), list):
            return "one of " + ", ".join(json.dumps(v) for v in schema["enum"])
        kind = schema.get("type")
        if isinstance(kind, str) and kind in _TYPE_WORDS:
            return _TYPE_WORDS[kind].capitalize()
    return "A value"


# ------------------------------------------------------------------ docstrings and names


def _one_line(text: str) -> str:
    return " ".join(text.split())


def split_description(text: str | None) -> tuple[str, dict[str, str]]:
    """Split a tool description into its main text and the ``Args:`` entries it documents.

    MCP servers often send a whole docstring as the description; its own
    ``Args:``/``Returns:``/``Raises:`` sections would confuse the docstring we
    generate, so they are cut off (and the ``Args:`` entries kept to describe
    parameters whose schema has no description).
    """
    lines = inspect.cleandoc(text or "").splitlines()
    main: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None  # the indentation of the section's argument lines
    for line in lines:
        match = _SECTION.match(line)
        if match:
            section, current, arg_indent = match.group(1).lower(), None, None
            continue
        if section is None:
            main.append(line)
            continue
        if section not in ("args", "arguments", "parameters", "params") or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        arg = _ARG_LINE.match(line)
        if arg and (arg_indent is None or indent <= arg_indent):
            arg_indent = indent
            current = arg.group(1)
            args[current] = arg.group(2).strip()
        elif current is not None:
            args[current] = (args[current] + " " + line.strip()).strip()
    return "\n".join(main).strip(), {k: _one_line(v) for k, v in args.items() if v.strip()}


def python_name(name: str) -> str:
    """``name`` as a Python identifier: other characters become ``_``, keywords get a trailing ``_``."""
    ident = _NOT_WORD.sub("_", name) or "_"
    if ident[0].isdigit():
        ident = "_" + ident
    if keyword.iskeyword(ident) or keyword.issoftkeyword(ident):
        ident += "_"
    return ident


def method_name(tool: str, taken: Iterable[str]) -> tuple[str | None, str | None]:
    """The method name for a tool, and a note when it differs or the tool is skipped.

    Returns:
        ``(name, note)``: ``name`` is ``None`` when the tool is skipped.
    """
    if tool.startswith("__") and tool.endswith("__"):
        return None, f"skipped tool {tool!r}: a dunder name cannot be a tool method"
    name = python_name(tool).lstrip("_")
    if not name:
        return None, f"skipped tool {tool!r}: no usable method name"
    if name[0].isdigit():
        name = "tool_" + name
    if name in RESERVED_METHODS:
        name = f"{name}_tool"
    if name in set(taken):
        return None, f"skipped tool {tool!r}: its method name {name!r} is already used by another tool"
    return name, (None if name == tool else f"tool {tool!r} is the method {name!r}")


# ------------------------------------------------------------------ specs


def _title(title: Any, wire: str) -> str | None:
    """A schema ``title`` as a description, unless it only repeats the name (pydantic's ``"Message"``)."""
    if not isinstance(title, str) or not title.strip():
        return None
    if _NOT_WORD.sub("", title).lower() == _NOT_WORD.sub("", wire).lower():
        return None
    return title


def _params(
    schema: Mapping[str, Any], doc_args: Mapping[str, str], exclude: Iterable[str] = (), owner: str = ""
) -> tuple[Param, ...]:
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), dict):
            defs.update(schema[key])
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return ()
    required_names = set(schema.get("required") or ())
    skip = set(exclude)
    required: list[Param] = []
    optional: list[Param] = []
    used = {"self"}
    for wire, sub in properties.items():
        if wire in skip or not isinstance(wire, str):
            continue
        name = python_name(wire)
        if name == "self" or name in used:
            name += "_"
        while name in used:
            name += "_"
        used.add(name)
        annotation, nullable = annotation_of(sub, defs)
        resolved, _ = _resolve(sub, defs, frozenset())
        resolved = resolved if isinstance(resolved, dict) else {}
        sub_dict = sub if isinstance(sub, dict) else {}
        description = sub_dict.get("description") or resolved.get("description")
        if not isinstance(description, str) or not description.strip():
            description = (
                doc_args.get(wire) or _title(sub_dict.get("title"), wire) or _title(resolved.get("title"), wire)
            )
        if not isinstance(description, str) or not description.strip():
            kind = _type_word(sub, defs)
            description = f"{owner} {wire!r} field ({kind[:1].lower() + kind[1:]})." if owner else f"{kind}."
        description = _one_line(description)
        is_required = wire in required_names
        default = sub_dict.get("default", resolved.get("default")) if not is_required else None
        param = Param(name, wire, annotation, is_required, default, nullable, description)
        (required if is_required else optional).append(param)
    return tuple(required + optional)


def method_spec(
    name: str,
    tool: str | None,
    description: str | None,
    input_schema: Mapping[str, Any] | None,
    *,
    returns: str = "The tool's result, as text.",
    exclude: Iterable[str] = (),
    fallback: str | None = None,
    owner: str = "",
) -> MethodSpec:
    """The `MethodSpec` of one tool (or action) from its description and JSON Schema.

    Args:
        name: the method name (see `method_name()`).
        tool: the tool's name on the server (``None`` for a generated ``step``).
        description: the tool's description (a docstring's own sections are cut off).
        input_schema: the JSON Schema of the arguments (an object schema).
        returns: the ``Returns:`` text.
        exclude: property names that do not become parameters.
        fallback: the description when the tool has none.
        owner: what the properties belong to (``"The action's"``): a property
            without a description is then described as that field, with its
            type; otherwise by its type alone (``"A string."``).
    """
    main, doc_args = split_description(description)
    if not main:
        main = fallback or f"Call the tool {tool or name!r}."
    params = _params(dict(input_schema or {}), doc_args, exclude, owner)
    return MethodSpec(name, tool, main, params, returns)


def plan_methods(tools: Iterable[Any]) -> tuple[list[MethodSpec], list[str]]:
    """Method specs for a server's tools (objects with ``name``, ``description``, ``input_schema``).

    Returns:
        ``(specs, notes)``: ``notes`` say which tools were renamed or skipped, and why.
    """
    specs: list[MethodSpec] = []
    notes: list[str] = []
    for tool in tools:
        name, note = method_name(tool.name, [s.name for s in specs])
        if note:
            notes.append(note)
        if name is None:
            continue
        specs.append(method_spec(name, tool.name, tool.description, tool.input_schema))
    return specs, notes


def step_spec(action_schema: Mapping[str, Any] | None) -> MethodSpec:
    """The ``step`` method of an environment without MCP tools: one parameter per action field.

    ``metadata`` (every OpenEnv action has it) is not a parameter.
    """
    schema = dict(action_schema or {})
    described = schema.get("description")
    text = "Take one step in the environment with this action."
    if isinstance(described, str) and described.strip():
        text = f"{text}\n\n{split_description(described)[0] or described.strip()}"
    return method_spec(
        "step",
        None,
        text,
        schema,
        returns="The observation that follows, as text.",
        exclude=("metadata",),
        owner="The action's",
    )


def bind_arguments(spec: MethodSpec, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments to send for a call ``method(*args, **kwargs)``, keyed by their wire names.

    Only the arguments the caller gave are sent (the server applies its own
    defaults); ``None`` for an optional, non-nullable parameter means "leave it out".

    Raises:
        TypeError: the call does not match the signature (missing or unknown arguments).
    """
    bound = spec.signature(with_self=False).bind(*args, **kwargs)
    out: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        param = spec.param(name)
        if value is None and not param.required and not param.nullable:
            continue
        out[param.wire] = value
    return out


# ------------------------------------------------------------------ reset


def _declared_keys(value: Any) -> frozenset[str] | None | bool:
    """Keys a reset declaration names; ``None`` for "any key"; ``False`` when it declares nothing."""
    if isinstance(value, dict):
        properties = value.get("properties")
        if value.get("additionalProperties") is True:
            return None
        if isinstance(properties, dict):
            return frozenset(str(k) for k in properties)
        return False
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return frozenset(value)
    return False


def reset_parameters(schema: Any, metadata: Any) -> frozenset[str] | None:
    """The keywords the environment's ``reset`` takes, as far as the server says.

    Looks for a JSON Schema (or a list of names) under ``reset``,
    ``reset_params``, ``reset_parameters`` or ``reset_schema`` in ``GET /schema``
    and ``GET /metadata``; a schema with ``additionalProperties: true`` means any
    key.  Servers that say nothing (OpenEnv's do not, today) get
    `DEFAULT_RESET_KEYS` (``seed`` and ``episode_id``).

    Returns:
        The accepted names, or ``None`` for any key.
    """
    for source in (schema, metadata):
        if not isinstance(source, dict):
            continue
        for key in ("reset", "reset_params", "reset_parameters", "reset_schema"):
            found = _declared_keys(source.get(key))
            if found is not False:
                return found  # type: ignore[return-value]
    return DEFAULT_RESET_KEYS


def filter_reset(kwargs: Mapping[str, Any], accepted: AbstractSet[str] | None) -> tuple[dict[str, Any], list[str]]:
    """Split ``reset`` keyword arguments (a dataset row) into those to send and those dropped.

    ``None`` values are dropped too when the key is accepted (a dataset column
    that is empty for this row means: not given).

    Returns:
        ``(kept, dropped_names)``; ``dropped_names`` is sorted.
    """
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for key, value in kwargs.items():
        if accepted is not None and key not in accepted:
            dropped.append(key)
        elif value is not None:
            kept[key] = value
    return kept, sorted(dropped)


# ------------------------------------------------------------------ rendering

#: String fields whose text is the observation's own words, shown without their name.
TEXT_FIELDS = ("text", "message", "content", "prompt", "observation", "output", "feedback")
_TEXT_SUFFIXES = ("_message", "_text", "_prompt")
_HIDDEN = frozenset({"done", "reward", "metadata"})
#: Put before the text ``reset`` returns (TRL appends it to the prompt's last message as is).
RESET_SEPARATOR = "\n\n"


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return value


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str, sort_keys=False)


def _is_text_name(name: str) -> bool:
    return name in TEXT_FIELDS or name.endswith(_TEXT_SUFFIXES)


def _message_texts(value: Any) -> list[str] | None:
    """The contents of a list of messages (dicts with a string ``content`` or ``text``), else ``None``."""
    if not isinstance(value, list) or not value:
        return None
    texts: list[str] = []
    for item in value:
        if isinstance(item, dict) and isinstance(item.get("content"), str):
            texts.append(item["content"])
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            texts.append(item["text"])
        else:
            return None
    return texts


def _string_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(item, str) for item in value)


def _words(fields: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(the fields' own text, their other words as ``name: value`` lines); empty strings carry none."""
    own: list[str] = []
    other: list[str] = []
    for name, value in fields.items():
        if isinstance(value, str):
            if value.strip():
                (own if _is_text_name(name) else other).append(value if _is_text_name(name) else f"{name}: {value}")
            continue
        messages = _message_texts(value)
        if messages is not None:
            own.extend(text for text in messages if text.strip())
        elif _string_list(value):
            other.append(f"{name}: {', '.join(value)}")
    return own, other


def _dedupe(lines: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for line in lines:
        key = line.strip()
        if key not in seen:
            seen.add(key)
            out.append(line)
    return out


def render_observation(observation: Any, metadata: Mapping[str, Any] | None = None) -> str:
    """The text the model sees for an observation (a dict or a pydantic model); no word is dropped.

    The rule, in order:

    1. ``done``, ``reward`` and ``metadata`` are the trainer's, not the
       model's: they are set aside (but see 4), and so are ``None`` fields.
    2. **Text** comes first, one part per line, in field order: every
       non-empty string field named ``text``, ``message``, ``content``,
       ``prompt``, ``observation``, ``output``, ``feedback`` or ``*_message`` /
       ``*_text`` / ``*_prompt``, as it is; and every list of messages (dicts
       with a string ``content``, or ``text``: ``{"role", "content"}``,
       TextArena's ``{"sender_id", "content", "category"}``) as their contents,
       in order.  A line equal to an earlier one is not repeated.
    3. When there is such text, every other string field follows as
       ``name: value``, and every list of strings as ``name: a, b, c`` (a
       string field is never dropped).  Numbers, booleans and other data are
       then left out: the observation's own words say what it means.
       When there is none, the whole observation (without the fields of 1)
       is rendered as compact JSON, which keeps every field.
    4. **Metadata words** appear when nothing else carries text (no string
       anywhere in the observation's fields, as in an MCP environment whose
       reset observation is empty and whose words are in its metadata): the
       metadata's text by rules 2 and 3 is put first.
    5. A string observation is itself; anything else is compact JSON.
       Nothing at all gives ``""``.

    Args:
        observation: the observation (a ``dict``, a pydantic model, a string).
        metadata: the step's metadata (``StepResult.metadata``), used by rule 4.
    """
    data = _jsonable(observation)
    if isinstance(data, str):
        return data
    if not isinstance(data, dict):
        return _compact(data)
    inner = data.get("metadata")
    meta = dict(metadata or {}) or (dict(inner) if isinstance(inner, dict) else {})
    fields = {k: v for k, v in data.items() if k not in _HIDDEN and v is not None}
    own, other = _words(fields)
    if own:
        return "\n".join(_dedupe([*own, *other]))
    lines: list[str] = []
    if not other:  # no string anywhere in the observation: the metadata's words, if any
        meta_own, meta_other = _words({k: v for k, v in meta.items() if v is not None})
        lines = _dedupe([*meta_own, *meta_other])
    if fields:
        lines.append(_compact(fields))
    return "\n".join(lines)


def reset_text(text: str | None) -> str | None:
    """The text ``reset`` returns: ``text`` after `RESET_SEPARATOR`, unless it is empty or starts with whitespace.

    TRL appends the reset text to the content of the prompt's last user
    message with no separator (``content + text``); the separator keeps the
    environment's first words apart from the prompt's last ones.
    """
    if not text or text[:1].isspace():
        return text
    return RESET_SEPARATOR + text


def render_tool_result(result: Any) -> str:
    """The text of a tool result (a [`ToolResult`][openenv.sync.ToolResult]): its text content, else its data as JSON.

    A result the tool flagged as an error starts with ``"Error: "``.
    """
    text = getattr(result, "text", "")
    if not text:
        data = getattr(result, "data", None)
        text = "" if data is None else data if isinstance(data, str) else _compact(_jsonable(data))
    if getattr(result, "is_error", False):
        return f"Error: {text}" if text else "Error: the tool failed"
    return text or "(no output)"


# ------------------------------------------------------------------ TRL's async trainer, pickling

#: ``openenv.aio``'s ``reset`` called with no event loop to run on (TRL's ``GRPOTrainer`` does that)
NO_LOOP = (
    "this is the openenv.aio environment class: await its reset() on an event loop, or call it from a worker "
    "thread of the loop that runs the instance (TRL's AsyncGRPOTrainer does). No event loop runs here: TRL's "
    "GRPOTrainer calls reset() from plain code, so give it the class from openenv.sync.environment_factory(...)"
)


def other_loop_message(name: str) -> str:
    """The error for an ``openenv.aio`` instance used on a second event loop while its session is open."""
    return (
        f"this {name} instance's session lives on another event loop: use each instance on one loop "
        "(create one per loop), or close() it first (its next reset then opens a session on the new loop)"
    )


def pool_pickle_message(name: str) -> str:
    """Why a class over an ``EnvPool`` does not pickle, and what to do instead."""
    return (
        f"{name} cannot be pickled: it checks sessions out of an EnvPool of this process. For a trainer that "
        "pickles its environment class (TRL's AsyncGRPOTrainer), generate the class from the server's URL, "
        "a Docker image or a checkout instead"
    )


def render_pickle_message(name: str, render: Any, error: BaseException) -> str:
    """Why a class whose ``render=`` does not pickle cannot be pickled."""
    return (
        f"{name} cannot be pickled: its render={render!r} cannot ({error}); pass a function defined at the "
        "top level of a module (not a lambda or a closure)"
    )


def unpickled_unreachable_message(name: str, origin_pid: int, error: str) -> str:
    """The error of a class unpickled in another process whose server cannot be reached from there."""
    return (
        f"{error}. {name} was unpickled here from process {origin_pid}: it reaches the same server URL, which "
        "must be reachable from this process (a server on 127.0.0.1 is reachable only on the same machine) and "
        "still running (the parent's class must stay open). Or generate the class from a Docker image or a "
        "checkout: each process then starts its own servers"
    )

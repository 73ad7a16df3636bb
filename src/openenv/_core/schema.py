"""Pydantic models built at runtime from an environment's JSON Schemas (``GET /schema``), sans-IO.

`models_from_schema()` turns the ``action``, ``observation`` and ``state``
schemas that an OpenEnv server publishes into pydantic models, and
[`openenv.Codec.from_schema()`][openenv.sync.Codec.from_schema] wraps them in a codec, so a client can be
typed without importing the environment's code:

```python
codec = Codec.from_schema(httpx.get(url + "/schema").json())
env = Env(url, codec=codec)            # or: Env.from_schema(url)
```

Supported JSON Schema: ``type`` (one or a list), ``properties``/``required``,
``$ref`` into ``$defs``/``definitions`` (nested models, recursion degrades to
dicts), ``anyOf``/``oneOf`` (unions, ``Optional``), ``allOf`` with one member,
``enum`` and ``const`` (``Literal``), ``items`` and ``prefixItems``,
``additionalProperties``, ``default``, ``description``, and the constraints
``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum``/
``multipleOf``/``minLength``/``maxLength``/``pattern``/``minItems``/``maxItems``.
Anything else (``format``, ``if``/``then``, ``not``, ...) is accepted without
being enforced.

Outgoing models (actions) keep the schema's ``additionalProperties: false``,
so unknown keys fail *before* anything is sent; incoming models
(observations, state) accept extra keys, so a server that adds a field does not
break the client.  Field names that are not identifiers or that collide with
pydantic's own attributes get an alias; dump with ``by_alias=True`` (the
schema codec does).
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from .errors import ProtocolError

__all__ = ["models_from_schema", "model_from_schema", "SchemaModels"]

_SIMPLE: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "null": type(None),
}
_CONSTRAINTS = {
    "minimum": "ge",
    "maximum": "le",
    "exclusiveMinimum": "gt",
    "exclusiveMaximum": "lt",
    "multipleOf": "multiple_of",
    "minLength": "min_length",
    "maxLength": "max_length",
    "pattern": "pattern",
    "minItems": "min_length",
    "maxItems": "max_length",
}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

SchemaModels = tuple[type[BaseModel] | None, type[BaseModel] | None, type[BaseModel] | None]


def _literal_values(values: list[Any]) -> tuple[Any, ...]:
    """``enum``/``const`` members for ``Literal``: JSON scalars only.

    Python < 3.13 refuses unhashable ``Literal`` members itself; 3.13 accepts
    them, so the check is made here, the same on every version.
    """
    for value in values:
        if value is not None and not isinstance(value, (str, int, float, bool)):
            raise TypeError(f"enum/const members must be JSON scalars, not {type(value).__name__} ({value!r:.80})")
    return tuple(values)


class _Builder:
    def __init__(self, root: Mapping[str, Any], outgoing: bool) -> None:
        self.defs: dict[str, Any] = {}
        for key in ("$defs", "definitions"):
            found = root.get(key)
            if isinstance(found, dict):
                self.defs.update(found)
        self.outgoing = outgoing
        self.models: dict[str, Any] = {}
        self.building: set[str] = set()

    def resolve_ref(self, ref: str) -> tuple[str, Mapping[str, Any]]:
        name = ref.rsplit("/", 1)[-1]
        target = self.defs.get(name)
        if not isinstance(target, dict):
            raise ValueError(f"cannot resolve $ref {ref!r} (only local $defs are supported)")
        return name, target

    def type_of(self, schema: Any, hint: str) -> Any:
        if schema is True or not isinstance(schema, dict) or not schema:
            return Any
        if "$ref" in schema:
            name, target = self.resolve_ref(schema["$ref"])
            if name in self.models:
                return self.models[name]
            if name in self.building:  # recursive definition: degrade to a dict
                return dict[str, Any]
            self.building.add(name)
            try:
                built = self.type_of(target, name)
            finally:
                self.building.discard(name)
            self.models[name] = built
            return built
        if "const" in schema:
            return Literal[_literal_values([schema["const"]])]  # type: ignore[misc, unused-ignore]
        if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
            return Literal[_literal_values(schema["enum"])]  # type: ignore[misc, unused-ignore]
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                members = [self.type_of(option, hint) for option in options]
                return members[0] if len(members) == 1 else Union[tuple(members)]  # type: ignore[return-value, unused-ignore]  # noqa: UP007 - built at run time
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1:
            return self.type_of(all_of[0], hint)
        kind = schema.get("type")
        if isinstance(kind, list):
            members = [self.type_of({**schema, "type": k}, hint) for k in kind]
            return members[0] if len(members) == 1 else Union[tuple(members)]  # type: ignore[return-value, unused-ignore]  # noqa: UP007 - built at run time
        if kind in _SIMPLE:
            return _SIMPLE[kind]
        if kind == "array":
            prefix = schema.get("prefixItems")
            if isinstance(prefix, list) and prefix:
                return tuple[tuple(self.type_of(item, hint) for item in prefix)]  # type: ignore[misc, unused-ignore]
            return list[self.type_of(schema.get("items", {}), hint + "Item")]  # type: ignore[misc, unused-ignore]
        if kind == "object" or "properties" in schema:
            if isinstance(schema.get("properties"), dict) and schema["properties"]:
                return self.model(schema, hint)
            extra = schema.get("additionalProperties", True)
            return dict[str, self.type_of(extra, hint + "Value")]  # type: ignore[misc, unused-ignore]
        return Any

    def model(self, schema: Mapping[str, Any], hint: str) -> type[BaseModel]:
        name = str(schema.get("title") or hint)
        name = re.sub(r"\W", "_", name) or "Model"
        required = set(schema.get("required") or ())
        fields: dict[str, Any] = {}
        for prop, sub in (schema.get("properties") or {}).items():
            annotation = self.type_of(sub, f"{name}_{prop}")
            kwargs: dict[str, Any] = {}
            if isinstance(sub, dict):
                if isinstance(sub.get("description"), str):
                    kwargs["description"] = sub["description"]
                for key, arg in _CONSTRAINTS.items():
                    if key in sub and not isinstance(sub[key], bool):
                        if key == "pattern" and sub.get("type") != "string":
                            continue
                        if key == "multipleOf" and isinstance(sub[key], (int, float)) and not sub[key] > 0:
                            # JSON Schema requires > 0; older pydantic accepts 0 and fails only when validating
                            raise ValueError(f"multipleOf must be greater than 0, not {sub[key]!r}")
                        kwargs[arg] = sub[key]
            field_name = prop
            if (
                not _IDENT.match(prop)
                or keyword.iskeyword(prop)
                or prop.startswith("model_")
                or hasattr(BaseModel, prop)
            ):
                field_name = "f_" + re.sub(r"\W", "_", prop)
                kwargs["alias"] = prop
            if prop in required:
                default: Any = ...
            elif isinstance(sub, dict) and "default" in sub:
                default = sub["default"]
            else:
                annotation = Optional[annotation]  # noqa: UP045 - built at run time
                default = None
            fields[field_name] = (annotation, Field(default, **kwargs))
        extra_schema = schema.get("additionalProperties", True)
        if self.outgoing:
            extra = "forbid" if extra_schema is False else "allow"
        else:
            extra = "allow"
        config = ConfigDict(extra=extra, populate_by_name=True, protected_namespaces=())  # type: ignore[typeddict-item]
        model: type[BaseModel] = create_model(name, __config__=config, **fields)
        model.__doc__ = (
            schema.get("description")
            if isinstance(schema.get("description"), str)
            else (f"Built from the server's JSON Schema for {name}.")
        )
        return model


def model_from_schema(schema: Mapping[str, Any], name: str, *, outgoing: bool) -> type[BaseModel]:
    """One pydantic model from one JSON Schema (its ``$defs`` included).

    Args:
        schema: an object schema such as ``GET /schema`` → ``action``.
        name: the model's name when the schema has no ``title``.
        outgoing: ``True`` for models we send (keep ``additionalProperties:
            false``), ``False`` for models we receive (extra keys allowed).
    """
    if not isinstance(schema, Mapping):
        raise TypeError(f"a JSON Schema must be an object, not {type(schema).__name__}")
    builder = _Builder(schema, outgoing)
    built = builder.type_of(dict(schema), name)
    if isinstance(built, type) and issubclass(built, BaseModel):
        return built
    # a schema that is not an object with properties: wrap it so it still validates
    return builder.model({"title": schema.get("title") or name, "properties": {}, "additionalProperties": True}, name)


def models_from_schema(schema: Mapping[str, Any]) -> SchemaModels:
    """(action, observation, state) models from a ``GET /schema`` response; a missing part gives ``None``.

    Raises:
        TypeError: ``schema`` is not a mapping.
        ProtocolError: a part cannot be turned into a model (unresolvable ``$ref``,
            unhashable ``enum`` members, an invalid ``pattern``, ...).
    """
    if not isinstance(schema, Mapping):
        raise TypeError(f"expected the /schema object, not {type(schema).__name__}")
    parts: list[type[BaseModel] | None] = []
    for key, name, outgoing in (
        ("action", "Action", True),
        ("observation", "Observation", False),
        ("state", "State", False),
    ):
        sub = schema.get(key)
        if not isinstance(sub, Mapping):
            parts.append(None)
            continue
        try:
            parts.append(model_from_schema(sub, name, outgoing=outgoing))
        except Exception as exc:  # untrusted input: whatever pydantic or re refuse, said once and clearly
            raise ProtocolError(
                f"the server's JSON Schema for {key!r} cannot be turned into a model "
                f"({type(exc).__name__}: {str(exc)[:300]}); use Env(...) without a schema codec"
            ) from None
    return parts[0], parts[1], parts[2]


class _BaseObservation(BaseModel):
    """A permissive observation: ``done``, ``reward``, ``metadata`` and every other key kept as an extra."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="allow", protected_namespaces=())

    done: bool = False
    reward: Any = None
    metadata: dict[str, Any] = Field(default_factory=dict)


def permissive_observation() -> type[BaseModel]:
    """The model a schema codec falls back to for a reset observation of another shape.

    An MCP environment's ``/schema`` describes its step observation
    (``CallToolObservation``: ``tool_name`` required), which its ``reset``
    does not return; this model takes any observation object.
    """
    return _BaseObservation


__all__ += ["permissive_observation"]

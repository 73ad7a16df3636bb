"""Example values built from JSON Schemas (sans-IO): a default action, type names for humans.

`default_value()` builds the smallest value that a schema accepts, so a
tool (``python -m openenv run``) can step an environment it knows nothing
about but its ``GET /schema``.  Only *required* properties are filled (plus a
discriminator's tag), each from, in order: ``const``, ``default``,
``examples`` (or ``example``), the first ``enum`` value, or a value built from
the type: ``""`` (a string of ``minLength`` ``x``; a sample for the common
``format`` values), ``0``/``0.0`` moved into ``minimum``/``maximum``/
``multipleOf``, ``False``, ``None``, ``[]`` (``minItems`` items), and objects
built recursively.  ``$ref`` (into ``$defs``/``definitions``), ``allOf``
(merged), ``anyOf``/``oneOf`` (the first branch that can be built, the
``discriminator`` tag set) and lists of types are followed.

When some part cannot be built (a ``pattern`` that ``""`` does not match,
contradictory bounds, a required recursive field, ``false``), it raises
`NoDefault` naming every such field and carrying an example in which
each of them is a ``"<...>"`` placeholder saying what it needs.

`describe_type()` and `describe_fields()` render a schema for people
(``integer (<= 100)``, ``"left" | "right"``, ``list[Move]``).
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["NoDefault", "default_value", "describe_type", "describe_fields", "FieldDoc", "MISSING"]

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()
"""The ``default`` of a `FieldDoc` that has none."""

_FORMATS = {
    "date-time": "1970-01-01T00:00:00Z",
    "date": "1970-01-01",
    "time": "00:00:00",
    "duration": "PT0S",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "email": "user@example.com",
    "uri": "https://example.com",
    "url": "https://example.com",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "hostname": "localhost",
}


class NoDefault(ValueError):
    """No value could be built for some required fields.

    Attributes:
        needs: ``{field path: what it needs}``, e.g. ``{"move": "a string matching ^[a-h][1-8]$"}``;
            the path of the whole value is ``""``.
        example: the value with a ``"<what it needs>"`` placeholder for each such field.
    """

    def __init__(self, needs: dict[str, str], example: Any) -> None:
        self.needs = dict(needs)
        self.example = example
        listed = "; ".join(f"{path or '(the value)'}: {need}" for path, need in self.needs.items())
        super().__init__(f"cannot build a default value: {listed}")


class _Fail(Exception):
    def __init__(self, needs: dict[str, str], example: Any) -> None:
        self.needs = needs
        self.example = example


def _fail(path: str, need: str) -> _Fail:
    return _Fail({path: need}, f"<{need}>")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class _Builder:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.resolving: list[str] = []

    def resolve(self, ref: str, path: str) -> Any:
        if ref == "#":
            return self.root
        if not ref.startswith("#/"):
            raise _fail(path, f"a value for the external $ref {ref!r}")
        node: Any = self.root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                raise _fail(path, f"a value for the unresolvable $ref {ref!r}")
            node = node[part]
        return node

    def build(self, node: Any, path: str, tag: tuple[str, Any] | None = None) -> Any:
        if node is True or node == {}:
            return None
        if node is False or not isinstance(node, Mapping):
            raise _fail(path, "a value (the schema accepts none)")
        if "const" in node:
            return copy.deepcopy(node["const"])
        if "default" in node:
            return copy.deepcopy(node["default"])
        examples = node.get("examples")
        if isinstance(examples, list) and examples:
            return copy.deepcopy(examples[0])
        if "example" in node:
            return copy.deepcopy(node["example"])
        enum = node.get("enum")
        if isinstance(enum, list) and enum:
            return copy.deepcopy(enum[0])
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in self.resolving:
                raise _fail(path, f"a value (recursive {ref.rsplit('/', 1)[-1]})")
            target = self.resolve(ref, path)
            self.resolving.append(ref)
            try:
                rest = {k: v for k, v in node.items() if k != "$ref"}
                return self.build({**target, **rest} if rest and isinstance(target, Mapping) else target, path, tag)
            finally:
                self.resolving.pop()
        all_of = node.get("allOf")
        if isinstance(all_of, list) and all_of:
            return self.build(self.merge(node, all_of, path), path, tag)
        for key in ("oneOf", "anyOf"):
            branches = node.get(key)
            if isinstance(branches, list) and branches:
                return self.union(node, branches, path)
        kind = node.get("type")
        if isinstance(kind, list):
            return self.union(node, [{**node, "type": t} for t in kind] or [{}], path)
        if kind is None:
            if "properties" in node or "required" in node:
                kind = "object"
            elif "items" in node or "prefixItems" in node:
                kind = "array"
            else:
                return None  # no type: anything goes
        if kind == "null":
            return None
        if kind == "boolean":
            return False
        if kind in ("integer", "number"):
            return self.number(node, kind, path)
        if kind == "string":
            return self.string(node, path)
        if kind == "array":
            return self.array(node, path)
        if kind == "object":
            return self.object(node, path, tag)
        raise _fail(path, f"a value of the unknown type {kind!r}")

    def merge(self, node: Mapping[str, Any], members: list[Any], path: str) -> dict[str, Any]:
        merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
        properties: dict[str, Any] = dict(merged.get("properties") or {})
        required: list[str] = list(merged.get("required") or [])
        for member in members:
            while isinstance(member, Mapping) and isinstance(member.get("$ref"), str):
                member = {**self.resolve(member["$ref"], path), **{k: v for k, v in member.items() if k != "$ref"}}
            if not isinstance(member, Mapping):
                continue
            if isinstance(member.get("allOf"), list):
                member = self.merge(member, member["allOf"], path)
            properties.update(member.get("properties") or {})
            required.extend(r for r in member.get("required") or [] if r not in required)
            for key, value in member.items():
                if key not in ("properties", "required"):
                    merged.setdefault(key, value)
        if properties:
            merged["properties"] = properties
        if required:
            merged["required"] = required
        return merged

    def union(self, node: Mapping[str, Any], branches: list[Any], path: str) -> Any:
        disc = node.get("discriminator")
        prop = disc.get("propertyName") if isinstance(disc, Mapping) else None
        mapping = disc.get("mapping") if isinstance(disc, Mapping) else None
        tags = {v: k for k, v in mapping.items()} if isinstance(mapping, Mapping) else {}
        first: _Fail | None = None
        for branch in branches:
            tag = None
            if isinstance(prop, str):
                ref = branch.get("$ref") if isinstance(branch, Mapping) else None
                tag = (prop, tags.get(ref, MISSING))
            try:
                return self.build(branch, path, tag)
            except _Fail as exc:
                first = first or exc
        assert first is not None
        raise first

    def number(self, node: Mapping[str, Any], kind: str, path: str) -> Any:
        integer = kind == "integer"
        lo, hi = _num(node, "minimum"), _num(node, "maximum")
        ex_lo, ex_hi = _num(node, "exclusiveMinimum"), _num(node, "exclusiveMaximum")
        step = _num(node, "multipleOf")
        if integer:  # the inclusive integer bounds
            lows = [math.ceil(v) for v in (lo,) if v is not None] + [
                math.floor(v) + 1 for v in (ex_lo,) if v is not None
            ]
            highs = [math.floor(v) for v in (hi,) if v is not None] + [
                math.ceil(v) - 1 for v in (ex_hi,) if v is not None
            ]
            lo, hi, ex_lo, ex_hi = (max(lows) if lows else None), (min(highs) if highs else None), None, None
        value: float = 0
        if lo is not None and value < lo:
            value = lo
        if ex_lo is not None and value <= ex_lo:
            upper = ex_hi if ex_hi is not None else hi
            value = (ex_lo + upper) / 2 if upper is not None and upper > ex_lo else ex_lo + 1
        if hi is not None and value > hi:
            value = hi
        if ex_hi is not None and value >= ex_hi:
            lower = ex_lo if ex_lo is not None else lo
            value = (lower + ex_hi) / 2 if lower is not None and lower < ex_hi else ex_hi - 1
        if step is not None and step > 0:
            value = math.ceil(value / step) * step
        ok = (
            (lo is None or value >= lo)
            and (hi is None or value <= hi)
            and (ex_lo is None or value > ex_lo)
            and (ex_hi is None or value < ex_hi)
        )
        if not ok:
            raise _fail(path, f"{'an integer' if integer else 'a number'} {_bounds(node)}".rstrip())
        return int(value) if integer else float(value)

    def string(self, node: Mapping[str, Any], path: str) -> str:
        fmt = node.get("format")
        min_len = _int(node, "minLength") or 0
        max_len = _int(node, "maxLength")
        candidates = [_FORMATS[fmt]] if isinstance(fmt, str) and fmt in _FORMATS else []
        candidates += ["", "x" * min_len]
        pattern = node.get("pattern")
        matcher = None
        if isinstance(pattern, str):
            try:
                matcher = re.compile(pattern)
            except re.error:
                raise _fail(path, f"a string matching {pattern}") from None
        for text in candidates:
            if len(text) < min_len or (max_len is not None and len(text) > max_len):
                continue
            if matcher is not None and not matcher.search(text):
                continue
            return text
        need = "a string"
        if pattern is not None:
            need += f" matching {pattern}"
        if min_len or max_len is not None:
            need += f" of length {_range(min_len, max_len)}"
        raise _fail(path, need)

    def array(self, node: Mapping[str, Any], path: str) -> list[Any]:
        prefix = node.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        items = node.get("items")
        if isinstance(items, list):  # draft 4-2019 tuples
            prefix, items = items, node.get("additionalItems", True)
        min_items = _int(node, "minItems") or 0
        schemas = list(prefix[:])
        while len(schemas) < min_items:
            schemas.append(True if items is None else items)
        if not schemas:
            return []
        if node.get("uniqueItems") and len(schemas) > len(prefix) + 1:
            raise _fail(path, f"a list of {min_items} distinct {describe_type(items, self.root)} items")
        out: list[Any] = []
        needs: dict[str, str] = {}
        for index, schema in enumerate(schemas):
            try:
                out.append(self.build(schema, f"{path}[{index}]"))
            except _Fail as exc:
                needs.update(exc.needs)
                out.append(exc.example)
        if needs:
            raise _Fail(needs, out)
        return out

    def object(self, node: Mapping[str, Any], path: str, tag: tuple[str, Any] | None) -> dict[str, Any]:
        properties = node.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = [r for r in node.get("required") or [] if isinstance(r, str)]
        if tag is not None and tag[0] not in required:
            required.append(tag[0])
        out: dict[str, Any] = {}
        needs: dict[str, str] = {}
        for name in required:
            sub = _join(path, name)
            schema = properties.get(name)
            if schema is None:
                extra = node.get("additionalProperties", True)
                schema = extra if isinstance(extra, (Mapping, bool)) else True
            if tag is not None and name == tag[0] and tag[1] is not MISSING and not _has_value(schema):
                out[name] = tag[1]
                continue
            try:
                out[name] = self.build(schema, sub)
            except _Fail as exc:
                needs.update(exc.needs)
                out[name] = exc.example
        if needs:
            raise _Fail(needs, out)
        return out


def _num(node: Mapping[str, Any], key: str) -> float | None:
    value = node.get(key)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(node: Mapping[str, Any], key: str) -> int | None:
    value = node.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _has_value(schema: Any) -> bool:
    return isinstance(schema, Mapping) and any(k in schema for k in ("const", "default", "enum"))


def _range(lo: Any, hi: Any) -> str:
    if hi is None:
        return f">= {lo}"
    if not lo:
        return f"<= {hi}"
    return f"{lo}..{hi}"


def _bounds(node: Mapping[str, Any]) -> str:
    parts = []
    for key, sign in (
        ("minimum", ">="),
        ("exclusiveMinimum", ">"),
        ("maximum", "<="),
        ("exclusiveMaximum", "<"),
        ("multipleOf", "multiple of"),
    ):
        if isinstance(node.get(key), (int, float)) and not isinstance(node.get(key), bool):
            parts.append(f"{sign} {node[key]}")
    return " and ".join(parts)


def default_value(schema: Mapping[str, Any] | bool, root: Mapping[str, Any] | None = None) -> Any:
    """The smallest value ``schema`` accepts, with only the required fields filled.

    Args:
        schema: a JSON Schema (for an action: the ``action`` of ``GET /schema``).
        root: the document that ``$ref`` pointers resolve against (default: ``schema``).

    Returns:
        The value (a dict for an object schema).

    Raises:
        NoDefault: some fields cannot be filled; ``needs`` names each with what
            it needs, ``example`` is the value with placeholders for them.
    """
    if root is None:
        root = schema if isinstance(schema, Mapping) else {}
    try:
        return _Builder(root).build(schema, "")
    except _Fail as exc:
        raise NoDefault(exc.needs, exc.example) from None


# -- descriptions --------------------------------------------------------------


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1] or "object"


def describe_type(schema: Any, root: Mapping[str, Any] | None = None) -> str:
    """A short type name for people: ``integer (<= 100)``, ``"a" | "b"``, ``list[Move]``, ``Move | null``.

    Args:
        schema: a JSON Schema.
        root: unused today (``$ref`` is named, not followed); accepted for symmetry.

    Returns:
        The description (``any`` for an empty schema).
    """
    if schema is True or schema == {} or not isinstance(schema, Mapping):
        return "any" if schema is not False else "nothing"
    if "const" in schema:
        return json.dumps(schema["const"])
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return " | ".join(json.dumps(v) for v in enum)
    if isinstance(schema.get("$ref"), str):
        return _ref_name(schema["$ref"])
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(describe_type(b, root) for b in schema[key])
    if isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
        return describe_type(schema["allOf"][0], root)
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(describe_type({**schema, "type": t}, root) for t in kind)
    if kind == "array" or (kind is None and ("items" in schema or "prefixItems" in schema)):
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list):
            text = "tuple[" + ", ".join(describe_type(p, root) for p in prefix) + "]"
        else:
            text = f"list[{describe_type(schema.get('items', True), root)}]"
    elif kind == "object" or (kind is None and "properties" in schema):
        extra = schema.get("additionalProperties")
        if "properties" in schema:
            text = str(schema.get("title") or "object")
        elif isinstance(extra, Mapping) and extra:
            text = f"dict[string, {describe_type(extra, root)}]"
        else:
            text = "object"
    elif isinstance(kind, str):
        text = kind
    else:
        text = "any"
    notes = []
    bounds = _bounds(schema)
    if bounds:
        notes.append(bounds)
    for key, label in (("minLength", "min length"), ("maxLength", "max length")):
        if isinstance(schema.get(key), int):
            notes.append(f"{label} {schema[key]}")
    for key, label in (("minItems", "min items"), ("maxItems", "max items")):
        if isinstance(schema.get(key), int) and not isinstance(schema.get("prefixItems"), list):
            notes.append(f"{label} {schema[key]}")
    if isinstance(schema.get("pattern"), str):
        notes.append(f"matching {schema['pattern']!r}")
    if isinstance(schema.get("format"), str):
        notes.append(f"format {schema['format']}")
    return f"{text} ({', '.join(notes)})" if notes else text


@dataclass(frozen=True)
class FieldDoc:
    """One property of an object schema, for people."""

    name: str
    type: str
    required: bool
    default: Any
    description: str


def describe_fields(schema: Any, root: Mapping[str, Any] | None = None) -> list[FieldDoc]:
    """The properties of an object schema (``$ref``/``allOf`` followed), required ones first.

    Args:
        schema: a JSON Schema of an object.
        root: the document that ``$ref`` pointers resolve against (default: ``schema``).

    Returns:
        One `FieldDoc` per property (``default`` is `MISSING` when there is none).
    """
    if not isinstance(schema, Mapping):
        return []
    if root is None:
        root = schema
    builder = _Builder(root)
    node: Any = schema
    try:
        while isinstance(node, Mapping) and isinstance(node.get("$ref"), str):
            node = builder.resolve(node["$ref"], "")
        if isinstance(node, Mapping) and isinstance(node.get("allOf"), list):
            node = builder.merge(node, node["allOf"], "")
    except _Fail:
        return []
    properties = node.get("properties") if isinstance(node, Mapping) else None
    if not isinstance(properties, Mapping):
        return []
    required = set(node.get("required") or [])
    docs = [
        FieldDoc(
            name=str(name),
            type=describe_type(prop, root),
            required=name in required,
            default=prop.get("default", MISSING) if isinstance(prop, Mapping) else MISSING,
            description=str(prop.get("description") or "") if isinstance(prop, Mapping) else "",
        )
        for name, prop in properties.items()
    ]
    return sorted(docs, key=lambda d: not d.required)

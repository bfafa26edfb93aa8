"""A setting is one field of one dataclass: its type and default are the field's, its doc and
bounds the field's metadata (`setting`). `object_schema` makes a section's JSON Schema from its
dataclass, and lengen.config.tier.schema a whole tier's from them, so a setting's type, bound and
doc are written once (torchtitan's way: each part owns its config). Plain types only: a config's
validation imports no torch.

    steps: int = setting(doc="optimizer steps", minimum=1)
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

# the JSON Schema keywords a setting may bound its value with
BOUNDS = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "enum",
    "items",
    "minItems",
    "maxItems",
    "uniqueItems",
    "pattern",
    "minLength",
    "$ref",
    "minProperties",
    "propertyNames",
    "properties",
    "required",
    "additionalProperties",
)
JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean", dict: "object"}


def setting(
    default: Any = dataclasses.MISSING, *, doc: str, null: bool = True, **bounds: Any
) -> Any:
    """A dataclass field that is a config setting: its default (none: the key is required), a
    one-line doc (config/README.md's "what it sets") and its JSON Schema bounds (BOUNDS; a
    callable bound is called each time the schema is made).
    `null=False` on an optional (X | None = None) field: the key may be left out, never written
    null (its None means absent, and no default is shown)."""
    unknown = set(bounds) - set(BOUNDS)
    if unknown:
        raise TypeError(f"setting(): unknown bound(s) {sorted(unknown)}; known: {BOUNDS}")
    meta = {"doc": doc, "bounds": bounds, "null": null}
    if isinstance(default, list | dict):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _type_schema(hint: Any) -> dict:
    """The JSON Schema of a Python type hint: int, float, str, bool, dict, X | None, tuple[X, X]
    (a pair), tuple[X, ...] (a list), dict[str, X] (name -> X), a settings dataclass (an
    object)."""
    if dataclasses.is_dataclass(hint):
        return object_schema(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"a setting's type is one type or it or None, not {hint}")
        node = _type_schema(inner[0])
        if "type" in node and type(None) in args and not dataclasses.is_dataclass(inner[0]):
            node["type"] = [node["type"], "null"]
        return node
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _type_schema(args[0])}
        return {
            "type": "array",
            "items": _type_schema(args[0]),
            "minItems": len(args),
            "maxItems": len(args),
        }
    if origin is dict and args:
        return {"type": "object", "additionalProperties": _type_schema(args[1])}
    if hint in JSON_TYPES:
        return {"type": JSON_TYPES[hint]}
    raise TypeError(f"no JSON Schema type for {hint}")


def described(cls: type) -> str:
    """A settings class's docstring, its first paragraph on one line: its schema node's
    description, and the doc of a field that holds it (`setting(doc=described(Inner))`)."""
    return " ".join((cls.__doc__ or "").split("\n\n")[0].split())


def _now(bound: Any) -> Any:
    """A bound as the schema is made: a callable one (`enum=scheme_names`: a table that may
    grow after import, e.g. a scheme added in a test) is called now, a tuple made a list."""
    value = bound() if callable(bound) else bound
    return list(value) if isinstance(value, tuple) else value


def object_schema(cls: type) -> dict:
    """A settings dataclass as a JSON Schema object: one property per `setting` field (its type
    from the hint, its bounds and doc from the field; a field without a doc is no setting: a
    task or a scheme fills it in), required where the field has no default, nothing else
    allowed, a subclass's own fields first; its description the docstring's first paragraph;
    `x-defaults` names the class (config/README.md's defaults, lengen.config.keys)."""
    hints = typing.get_type_hints(cls)
    properties, required = {}, []
    own = cls.__dict__.get("__annotations__", {})  # a subclass's own keys first, then its base's
    for f in sorted(dataclasses.fields(cls), key=lambda f: f.name not in own):
        if "doc" not in f.metadata:
            continue
        bounds = {k: _now(v) for k, v in f.metadata["bounds"].items()}
        node = {**_type_schema(hints[f.name]), **bounds}
        if not f.metadata["null"] and isinstance(node.get("type"), list):
            node["type"] = next(t for t in node["type"] if t != "null")  # absent, never null
        if "$ref" in node:
            node = {"$ref": node["$ref"]}  # the referenced node's type and bounds
        elif "enum" in node:
            node.pop("type", None)  # the values' own
        elif "items" in bounds:
            node["items"] = {**_type_schema(hints[f.name]).get("items", {}), **bounds["items"]}
        properties[f.name] = {**node, "description": f.metadata["doc"]}
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(f.name)
    node = {"type": "object", "additionalProperties": False, "properties": properties}
    if cls.__doc__:  # where no field or schema node says more
        node["description"] = described(cls)
    if required:
        node["required"] = required
    node.update(getattr(cls, "SCHEMA", {}))  # what no one field says (if source ... then ...)
    node["x-defaults"] = [f"{cls.__module__}:{cls.__qualname__}"]
    return node


def shows_default(f: dataclasses.Field) -> bool:
    """Whether config/README.md shows the field's default: not for an absent-only setting."""
    return not (f.metadata.get("null") is False and f.default is None)

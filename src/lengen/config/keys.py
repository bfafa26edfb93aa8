"""Every config key, from the schema: config/README.md's table (as snakemake-workflows'
config/README.md, it describes every key). `python -m lengen.config.keys` prints it;
tests/test_config.py fails when config/README.md and the schema differ or a key has no
description.

Its default column is read from the dataclasses that parse each section (a schema node's
`x-defaults` names them, module:Class): TrainSpec, EarlyStopSpec, ModelConfig, a
task's TaskSpec, RuntimeConfig. What a job does with an absent key is what that column says, as
the defaults live nowhere else; the sections a settings dataclass owns (`train`, `model`) take
their keys, types, bounds and docs from its fields too (lengen.core.settings).

No workflow job imports this module: it writes config/README.md's table, which tests/test_config.py
holds to the schema and the dataclasses.
"""

from __future__ import annotations

import dataclasses
import importlib

from lengen.config.config import schema
from lengen.core.cli import command_parser, one_line_errors
from lengen.core.settings import shows_default

MAP = "<name>"  # a key of a name -> entry mapping (variants, figures, jobs)


def _resolve(node: dict, defs: dict) -> dict:
    """The node with its $ref and allOf merged in (properties, required, description)."""
    node = dict(node)
    while "$ref" in node:
        target = defs[node.pop("$ref").rsplit("/", 1)[-1]]
        node = {**target, **node}
    for part in node.pop("allOf", []):
        part = _resolve(part, defs)
        node["properties"] = {**part.get("properties", {}), **node.get("properties", {})}
        node["required"] = [*node.get("required", []), *part.get("required", [])]
    return node


def _kind(node: dict) -> str:
    """A short type: the enum's values, the type (with its minimum), or 'mapping'."""
    if "enum" in node and node["enum"]:
        return " \\| ".join(str(v) for v in node["enum"])
    kind = node.get("type", "mapping" if "properties" in node else "any")
    kind = "mapping" if kind == "object" else kind  # a section, as YAML calls it
    kind = " or ".join(map(str, kind)) if isinstance(kind, list) else str(kind)
    if "minimum" in node:
        kind += f" >= {node['minimum']}"
    if kind == "array" and "items" in node:
        kind = f"list of {node['items'].get('type', 'entries')}"
    return kind


def shown(value) -> str:
    """A default as the YAML would write it (null, true, [0.9, 0.999], 1000, paper)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple | list):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    return str(value)


def defaults(node: dict) -> dict[str, str]:
    """The defaults of a schema node's keys: each field with a default of the dataclasses its
    `x-defaults` names (module:Class), as `shown` writes it."""
    out = {}
    for ref in node.get("x-defaults", []):
        module, _, name = ref.partition(":")
        for f in dataclasses.fields(getattr(importlib.import_module(module), name)):
            if not shows_default(f):
                continue
            if f.default is not dataclasses.MISSING:
                out[f.name] = shown(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = shown(f.default_factory())
    return out


def rows(
    node: dict | None = None, path: str = "", required: bool = True, defs=None, default: str = ""
) -> list:
    """(key path, type, required, default, description) for every key under `node`, depth
    first (the default: where the key is optional and its section's dataclass has one)."""
    if node is None:
        node = schema()
        defs = node.get("$defs", {})
    node = _resolve(node, defs)
    out = []
    if path:
        text = " ".join(str(node.get("description", "")).split())
        out.append((path, _kind(node), "yes" if required else "", default, text))
    needed, given = set(node.get("required", [])), defaults(node)
    for key, child in node.get("properties", {}).items():
        fallback = "" if key in needed else given.get(key, "")
        out += rows(child, f"{path}.{key}" if path else key, key in needed, defs, fallback)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        out += rows(extra, f"{path}.{MAP}" if path else MAP, False, defs)
    return out


def markdown() -> str:
    """The table of every key."""
    lines = [
        "| key | type | required | default | what it sets |",
        "| --- | --- | --- | --- | --- |",
    ]
    bar = "\\|"  # a literal | inside a table cell
    lines += [
        f"| `{p}` | {k} | {r} | {f'`{d}`' if d else ''} | {t.replace('|', bar)} |"
        for p, k, r, d, t in rows()
    ]
    return "\n".join(lines)


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: print the table of every config key."""
    command_parser(__spec__, __doc__).parse_args(argv)
    print(markdown())


if __name__ == "__main__":
    main()

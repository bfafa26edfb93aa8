"""Every config key, from the schema: config/README.md's table (as snakemake-workflows'
config/README.md, it describes every key). `python -m lengen.config.keys` prints it;
tests/test_config.py fails when config/README.md and the schema differ or a key has no
description.
"""

from __future__ import annotations

from lengen.config.config import schema
from lengen.core.cli import command_parser

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
    kind = " or ".join(map(str, kind)) if isinstance(kind, list) else str(kind)
    if "minimum" in node:
        kind += f" >= {node['minimum']}"
    if kind == "array" and "items" in node:
        kind = f"list of {node['items'].get('type', 'entries')}"
    return kind


def rows(node: dict | None = None, path: str = "", required: bool = True, defs=None) -> list:
    """(key path, type, required, description) for every key under `node`, depth first."""
    if node is None:
        node = schema()
        defs = node.get("$defs", {})
    node = _resolve(node, defs)
    out = []
    if path:
        text = " ".join(str(node.get("description", "")).split())
        out.append((path, _kind(node), "yes" if required else "", text))
    needed = set(node.get("required", []))
    for key, child in node.get("properties", {}).items():
        out += rows(child, f"{path}.{key}" if path else key, key in needed, defs)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        out += rows(extra, f"{path}.{MAP}" if path else MAP, False, defs)
    return out


def markdown() -> str:
    """The table of every key."""
    lines = ["| key | type | required | what it sets |", "| --- | --- | --- | --- |"]
    bar = "\\|"  # a literal | inside a table cell
    lines += [f"| `{p}` | {k} | {r} | {d.replace('|', bar)} |" for p, k, r, d in rows()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """CLI: print the table of every config key."""
    command_parser(__spec__, __doc__).parse_args(argv)
    print(markdown())


if __name__ == "__main__":
    main()

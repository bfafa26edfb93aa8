"""The mutation score's setup names today's code (issue 47, item 8): every path pyproject.toml's
[tool.mutmut] mutates exists, every test it runs exists, and the shards cover the mutated
modules (the equivalence rules' names: tests/test_tools.py)."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch

from .conftest import ROOT


def _mutmut() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]


def test_every_mutated_path_and_selected_test_exists():
    cfg = _mutmut()
    for pattern in cfg["only_mutate"]:
        assert list(ROOT.glob(pattern)), pattern
    for test in cfg["pytest_add_cli_args_test_selection"]:
        path, _, name = test.partition("::")
        assert (ROOT / path).is_file(), path
        assert not name or f"def {name}(" in (ROOT / path).read_text(), test


def test_the_mutation_shards_are_the_mutated_modules_each_once():
    """tools/mutation.py's SHARDS cover every module pyproject.toml mutates, each in one shard."""
    from .helpers import load_script

    shards = load_script(ROOT / "tools" / "mutation.py").SHARDS
    modules = {
        ".".join(path.relative_to(ROOT / "src").with_suffix("").parts).removesuffix(".__init__")
        for pattern in _mutmut()["only_mutate"]
        for path in ROOT.glob(pattern)
        if path.suffix == ".py"
    }
    assert len(modules) > 20
    for module in modules:
        name = f"{module}.x_f__mutmut_1"
        found = [s for s, patterns in shards.items() if any(fnmatch(name, p) for p in patterns)]
        assert len(found) == 1, (module, found)

"""The mutation score's setup names today's code (issue 47, item 8): every path pyproject.toml's
[tool.mutmut] mutates exists, every test it runs exists, and every equivalence rule of
tools/mutation_equivalent.yaml names a function that exists where it says."""

from __future__ import annotations

import importlib
import re
import tomllib
from fnmatch import fnmatch

import yaml

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


def test_every_equivalence_rule_names_an_existing_function():
    rules = yaml.safe_load((ROOT / "tools" / "mutation_equivalent.yaml").read_text())
    for rule in rules:
        assert rule.get("reason"), rule
        name = rule.get("name")
        if name is None or name.endswith(".*"):  # every function of a package
            continue
        found = re.fullmatch(r"(lengen[\w.]*)\.(?:x_(\w+?)|xǁ(\w+)ǁ(\w+?))\*?", name)
        assert found, name
        module = importlib.import_module(found[1])
        if found[2]:
            assert hasattr(module, found[2]), name
        else:  # a method: xǁClassǁmethod (mutmut 3's name for it)
            assert hasattr(getattr(module, found[3], None), found[4]), name


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

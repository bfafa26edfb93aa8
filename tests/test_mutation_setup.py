"""The mutation score's setup names today's code (issue 47, item 8): every path pyproject.toml's
[tool.mutmut] mutates exists, every test it runs exists, and every equivalence rule of
tools/mutation_equivalent.yaml names a function that exists where it says."""

from __future__ import annotations

import importlib
import re
import tomllib

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
        found = re.fullmatch(r"(lengen[\w.]*)\.x_(\w+?)\*?", name)
        assert found, name
        module = importlib.import_module(found[1])
        function = found[2].split("__")[0]  # a method: x_Class__method
        assert hasattr(module, function), name

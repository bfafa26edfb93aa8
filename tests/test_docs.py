"""What a user reads is the data's: README's verdict block is what the report's rules make of the
committed reference's tables (tools/readme_verdicts.py)."""

from __future__ import annotations

import importlib.util

from .conftest import ROOT


def _tool():
    spec = importlib.util.spec_from_file_location(
        "readme_verdicts", ROOT / "tools" / "readme_verdicts.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_verdicts_are_the_reference_judged_by_todays_rules():
    tool = _tool()
    readme = (ROOT / "README.md").read_text()
    assert tool.BEGIN in readme and tool.END in readme
    shown = tool.BEGIN + readme.split(tool.BEGIN, 1)[1].split(tool.END, 1)[0] + tool.END
    assert shown == tool.block(), (
        "README's verdicts are stale: python tools/readme_verdicts.py --write"
    )
    # the block is replaceable in place, and the replacement is idempotent
    assert tool.replaced(readme, shown) == readme

"""Every `python -m lengen.<module>` tool's --help names how to run it and says its whole first
paragraph (issue 48: usage lines said `cluster.py`, descriptions stopped mid-sentence)."""

from __future__ import annotations

import importlib

import pytest

MODULES = [
    "lengen.config.cluster", "lengen.report.refresh", "lengen.report.report",
    "lengen.report.figures", "lengen.train.train", "lengen.data.tokens", "lengen.data.corpus",
    "lengen.analysis.evaluate", "lengen.analysis.tables", "lengen.analysis.attention",
    "lengen.analysis.theory_cases", "lengen.analysis.influence", "lengen.analysis.perplexity",
]  # fmt: skip


@pytest.mark.parametrize("name", MODULES)
def test_help_says_python_m_and_the_whole_first_paragraph(name, capsys):
    module = importlib.import_module(name)
    with pytest.raises(SystemExit):
        module.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith(f"usage: python -m {name} ")
    first = " ".join(module.__doc__.strip().split("\n\n")[0].split())
    assert first in out


def test_the_cluster_check_reads_the_config_before_looking_for_slurm(tmp_path, capsys):
    from lengen.config import cluster

    with pytest.raises(SystemExit) as ended:  # the config's error, in one line, before sinfo
        cluster.main(["--configfile", str(tmp_path / "missing.yaml")])
    assert ended.value.code == 2
    assert capsys.readouterr().err == f"ConfigError: {tmp_path / 'missing.yaml'}: no such file; " \
        "a config is a YAML file (config/<tier>.yaml)\n"

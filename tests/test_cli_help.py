"""Every `python -m lengen.<module>` tool's --help names how to run it and says its whole first
paragraph (issue 48: usage lines said `cluster.py`, descriptions stopped mid-sentence)."""

from __future__ import annotations

import importlib

import pytest

MODULES = [
    "lengen.config.cluster",
    "lengen.report.refresh",
    "lengen.report.report",
    "lengen.report.figures",
    "lengen.train.train",
    "lengen.data.tokens",
    "lengen.data.corpus",
    "lengen.analysis.evaluate",
    "lengen.analysis.tables",
    "lengen.analysis.attention",
    "lengen.analysis.theory_cases",
    "lengen.analysis.influence",
    "lengen.analysis.perplexity",
]


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
    assert (
        capsys.readouterr().err == f"ConfigError: {tmp_path / 'missing.yaml'}: no such file; "
        "a config is a YAML file (config/<tier>.yaml)\n"
    )


def _parsers(parser):
    """`parser` and every sub-command's parser under it."""
    import argparse

    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_every_lengen_option_has_help_and_shows_its_default(capsys, monkeypatch):
    """`lengen` for its users: its --help says what it does without developers' notes; every
    option of every sub-command (each task's `sample` included, whatever tasks there are) says
    what it is, and one with a default shows it."""
    import argparse

    from lengen import cli

    built = []
    monkeypatch.setattr(
        argparse.ArgumentParser,
        "parse_args",
        lambda self, argv=None: built.append(self) or (_ for _ in ()).throw(SystemExit(0)),
    )
    with pytest.raises(SystemExit):
        cli.main([])
    top = built[0]
    assert "No workflow job" not in top.format_help() and "lengen sample" in top.format_help()
    for parser in _parsers(top):
        text = " ".join(parser.format_help().split())
        for action in parser._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            assert action.help, (parser.prog, action.option_strings)
            shown = action.default is not None and action.default is not False
            if shown and "default" not in action.help:
                assert f"(default: {action.default})" in text, (parser.prog, action.dest)


def test_a_sample_length_that_cannot_be_honoured_is_refused(capsys):
    """`lengen sample parity_scratchpad --jump 3 --length 16` once printed examples of length 12
    (l rounded down to a multiple of k) without a word: refused, naming the lengths that fit."""
    from lengen import cli

    with pytest.raises(SystemExit) as ended:
        cli.main(["sample", "parity_scratchpad", "--jump", "3", "--length", "16"])
    assert ended.value.code == 2
    assert "--length 16: l = 8 input bits is not a multiple of --jump 3; give 12 or 18" in (
        capsys.readouterr().err
    )
    cli.main(["sample", "parity_scratchpad", "--jump", "3", "--length", "18"])
    assert '"length": 18' in capsys.readouterr().out

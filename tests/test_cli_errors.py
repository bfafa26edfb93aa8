"""Issue 65: every tool (`lengen ...` and each `python -m lengen....`) answers a bad argument, a
missing input, a folder it must not overwrite and a bad config with one line and exit 2, before
any work; a traceback (any exception other than that exit) fails the test."""

from __future__ import annotations

import importlib

import pytest

from .conftest import ROOT

MISSING = "/nonexistent/lengen-missing"


def cases(tmp: str) -> list[tuple[str, list[str], str]]:
    """(module, argv, what its one line must say)."""
    m = MISSING
    return [
        ("lengen.config.config", [f"{m}.yaml"], f"{m}.yaml: no such file"),
        ("lengen.config.cluster", ["--configfile", f"{m}.yaml"], "ConfigError: " + m),
        ("lengen.config.cluster", ["--configfile", f"{tmp}/binary.yaml"], "not a UTF-8 text file"),
        ("lengen.report.refresh", ["--configfile", f"{m}.yaml"], f"{m}.yaml: no such file"),
        ("lengen.report.rejudge", ["--configfile", f"{tmp}/dup.yaml"], "duplicate key 'a'"),
        ("lengen.cli", ["setup", "--configfile", f"{tmp}/bad.yaml"], "not valid YAML"),
        (
            "lengen.report.report",
            ["--config", "{bad", "--out", f"{tmp}/R.md"],
            "--config: neither a file nor the JSON",
        ),
        (
            "lengen.report.figures",
            ["sparse_parity", "--tables", f"{m}.csv", "--out", f"{tmp}/f.png"],
            f"{m}.csv: missing; its eval rule makes it",
        ),
        (
            "lengen.train.train",
            ["--spec", f"{m}.json", "--out", f"{tmp}/t"],
            "neither a file nor JSON",
        ),
        (
            "lengen.train.group",
            ["--spec", f"{m}.json", "--out", f"{tmp}/g"],
            "neither a file nor JSON",
        ),
        (
            "lengen.data.tokens",
            [
                "--tokenizer",
                "{x",
                "--source",
                "debian",
                "--corpus-dir",
                tmp,
                "--max-tokens",
                "{}",
                "--out",
                f"{tmp}/tok",
            ],
            "not JSON",
        ),
        (
            "lengen.data.corpus",
            ["--corpus", "[1]", "--seed", "0", "--out", f"{tmp}/c"],
            "not a JSON object",
        ),
        (
            "lengen.data.corpus",
            ["--corpus", '{"source": "debian"}', "--seed", "0", "--out", f"{tmp}/kept"],
            "a folder this tool did not write",
        ),
        (
            "lengen.analysis.evaluate",
            [
                "run",
                "--model",
                f"{m}.pt",
                "--testset",
                f"{m}.npz",
                "--batch-size",
                "4",
                "--out",
                f"{tmp}/e.csv",
            ],
            f"ModelFileError: {m}.pt: missing",
        ),
        (
            "lengen.analysis.tables",
            ["combine", "--tables", f"{m}.csv", "--out", f"{tmp}/e.csv"],
            f"{m}.csv: missing",
        ),
        (
            "lengen.analysis.attention",
            ["--model", f"{m}.pt", "--out", f"{tmp}/a.csv"],
            f"{m}.pt: missing",
        ),
        (
            "lengen.analysis.influence",
            [
                "--short",
                f"{m}.pt",
                "--long",
                f"{m}.pt",
                "--tokens",
                f"{m}.bin",
                "--influence",
                "{}",
                "--out",
                f"{tmp}/i.csv",
            ],
            f"{m}.pt: missing",
        ),
        (
            "lengen.analysis.perplexity",
            [
                "--short",
                f"{m}.pt",
                "--long",
                f"{m}.pt",
                "--tokens",
                f"{m}.bin",
                "--eval",
                "{}",
                "--out",
                f"{tmp}/p.csv",
                "--out-chunks",
                f"{tmp}/pc.csv",
            ],
            f"{m}.bin",
        ),
        (
            "lengen.cli",
            ["influence", "--model", f"{m}", "--tokens", f"{m}.bin", "--out", f"{tmp}/i.csv"],
            m,
        ),
        ("lengen.core.gpus", ["99", "--", "true"], "NoGpus: a job asks for 99 GPU(s)"),
        ("lengen.report.coverage", ["--tables", m], f"NoCells: {m}: no table with cells"),
        ("lengen.report.reference", [m, tmp], f"{m}: no such folder"),
    ]


TOOLS = sorted(
    {c[0] for c in cases("/tmp")}
    | {
        "lengen.report.rules",
        "lengen.config.keys",
        "lengen.analysis.theory_cases",
        "lengen.core.tracking",
    }
)


def _ends_in_one_line(module: str, argv: list[str], capsys) -> str:
    main = importlib.import_module(module).main
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 2, (module, argv, ended.value.code)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("index", range(len(cases("/tmp"))))
def test_a_bad_input_is_one_line_and_exit_2(index, tmp_path, capsys):
    (tmp_path / "binary.yaml").write_bytes(b"\xff\xfe\x00binary")
    (tmp_path / "dup.yaml").write_text("a: 1\na: 2\n")
    (tmp_path / "bad.yaml").write_text("a: [1\n")
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "thesis.tex").write_text("years of work")  # never replaced
    module, argv, says = cases(str(tmp_path))[index]
    err = _ends_in_one_line(module, argv, capsys)
    lines = [x for x in err.splitlines() if not x.startswith(("usage:", " "))]
    assert len(lines) == 1 and says in lines[0], err
    assert (tmp_path / "kept" / "thesis.tex").exists()


@pytest.mark.parametrize("module", TOOLS)
def test_an_unknown_option_is_argparses_usage_and_exit_2(module, capsys):
    err = _ends_in_one_line(module, ["--no-such-option"], capsys)
    assert "unrecognized arguments: --no-such-option" in err or "required" in err, err


def test_every_tool_with_a_main_is_driven_here():
    """A new tool (a module with `main` run as `python -m`) joins these drills."""
    tools = set()
    for path in (ROOT / "src" / "lengen").rglob("*.py"):
        text = path.read_text()
        if "\ndef main(" in text and '__name__ == "__main__"' in text:
            rel = path.relative_to(ROOT / "src").with_suffix("")
            tools.add(".".join(rel.parts))
    assert tools - {"lengen.core.floats"} <= set(TOOLS), tools


def test_a_tool_exits_without_the_collectors_passes_once_registered(monkeypatch):
    """Every tool's exit skips the garbage collector's passes over what its libraries left
    (gc.freeze at exit: 1-2 s a job that imported torch, MLflow and DeepSpeed,
    benchmarks/job_phases.py): registered once, however many tools one process runs."""
    import gc

    from lengen.core import cli

    registered = []
    monkeypatch.setattr(cli.atexit, "register", registered.append)
    cli.quick_exit.cache_clear()  # as in a fresh process
    tool = cli.one_line_errors(lambda x: x + 1)
    assert tool(1) == 2 and tool(2) == 3
    assert registered == [gc.freeze]
    cli.quick_exit.cache_clear()  # the next tool of this process registers it for real

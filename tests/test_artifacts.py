"""The artifact contract (lengen.config.artifacts): one place names every report-level file."""

from __future__ import annotations

import json

from lengen.config import artifacts
from lengen.report import report


def test_report_reads_exactly_the_contracts_tables(smoke_config):
    """The report reads one tidy table per task the tier runs (a generation task's
    `<task>_accuracy.csv`, whatever tasks there are) and the language and theory tables where
    the tier has those sections."""
    from lengen import tasks

    paths = artifacts.report_tables(smoke_config)
    reports = smoke_config["reports_dir"]
    for name in tasks.generation_tasks():
        if name in smoke_config:
            assert paths[name] == f"{reports}/{name}_accuracy.csv"
    assert paths["perplexity_chunks"] == f"{reports}/table1_chunk_nll.csv"
    assert {"sparse_parity", "theory", "influence", "perplexity_window"} <= set(paths)
    assert all(p.startswith(f"{reports}/") and p.endswith(".csv") for p in paths.values())
    no_nl = {k: v for k, v in smoke_config.items() if k != "natural_language"}
    assert "influence" not in artifacts.report_tables(no_nl)


def test_report_config_has_no_figure_sections_and_the_report_runs_on_it(tmp_path, smoke_config):
    sliced = artifacts.report_config(smoke_config)
    assert all("figures" not in v for v in sliced.values() if isinstance(v, dict))
    assert sliced["majority"]["train_max_lens"] == smoke_config["majority"]["train_max_lens"]
    restyled = {**smoke_config, "majority": {**smoke_config["majority"], "figures": {}}}
    assert artifacts.report_config(restyled) == sliced  # restyling never changes the slice
    rows = report.write_report(sliced, tmp_path / "REPORT.md", paths={})
    assert set(rows.verdict) == {"not run"}
    text = (tmp_path / "REPORT.md").read_text()
    assert "`fig_majority.png`" in text  # the registry's; a diagnostic asked for by a `figures`
    # section (sparse parity's attention) only with the rule's --figures (the next test)
    assert "`sparse_parity_attention_neox.png`" not in text
    listed = artifacts.report_figures(smoke_config)
    assert "sparse_parity_attention_neox.png" in listed


def test_report_lists_the_figures_only_figures_sections_add(tmp_path, smoke_config):
    """REPORT.md names every figure of the run, also those a `figures` section alone adds (an
    optional figure, a config-only one), though the report's config slice has no such sections:
    the rule passes the list (`--figures`), and a whole config file gives it too."""
    import yaml

    cfg = {**smoke_config, "parity_scratchpad": {**smoke_config["parity_scratchpad"]}}
    cfg["parity_scratchpad"]["figures"] = {
        **cfg["parity_scratchpad"]["figures"],
        "fig8_equal": {"panels": ["ppc"]},  # optional: drawn where the key is there
        "fig_ppc_alone": {"panels": ["ppc"], "title": "PPC"},  # config only
    }
    path = tmp_path / "tier.yaml"
    path.write_text(yaml.safe_dump(cfg))
    listed = artifacts.report_figures(cfg)
    assert {"fig8_equal_budgets.png", "fig_ppc_alone.png"} <= set(listed)
    assert "fig_ppc_alone.png" not in artifacts.report_figures(artifacts.report_config(cfg))
    report.main(["--config", str(path), "--out", str(tmp_path / "a" / "REPORT.md")])
    sliced = json.dumps(artifacts.report_config(cfg))
    out = str(tmp_path / "b" / "REPORT.md")
    report.main(["--config", sliced, "--figures", *listed, "--out", out])
    for run in ("a", "b"):
        text = (tmp_path / run / "REPORT.md").read_text()
        assert "`fig8_equal_budgets.png`" in text and "`fig_ppc_alone.png`" in text


def test_every_figure_title_names_the_size_trained_and_no_label_claims_the_paper():
    """Issue 64: a figure names the model actually trained (the paper's 12 x 1024 only where that
    is what trains), and no variant label says "(paper)" of a smaller model."""
    from lengen.config.config import load
    from lengen.report.figures import figure_jobs

    for tier, size in (("config", "3 layers x 64"), ("paper", "12 layers x 1024")):
        cfg = load(f"config/{tier}.yaml")
        assert artifacts.trained_model(cfg["sparse_parity"]) == size
        assert all("(paper)" not in v["label"] for v in cfg["sparse_parity"]["variants"].values())
        titles = {
            stem: job.args[job.args.index("--title") + 1]
            for stem, job in figure_jobs(cfg).items()
            if "--title" in job.args
        }
        assert f"tier, {size}" in titles["fig1_sparse_parity"]
        assert all(" layers x " in t for t in titles.values()), titles
    section = {
        "model": {"n_layer": 3, "d_model": 64},
        "variants": {"a": {}, "b": {"model": {"n_layer": 2, "d_model": 32}}},
        "schemes": {"variants": {"c": {}}},
    }
    assert artifacts.trained_model(section, ["a", "c"]) == "3 layers x 64"
    assert artifacts.trained_model(section, ["a", "b"]) == "3 layers x 64 / 2 layers x 32"
    # a DEPARTURE of the model is named in the title (issue 75)
    section["variants"]["b"]["model"]["attn_scale"] = "log_length"
    assert artifacts.trained_model(section, ["a", "b"]) == (
        "3 layers x 64 / 2 layers x 32 + log-length attention (DEPARTURE)"
    )

"""The sparse-parity probe runner: overrides merge into the default tier and validate; the verdict
names the longest length where every k_test <= K_train is >= 0.9; every committed row has a
definition and a verdict consistent with its numbers."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from .conftest import ROOT


@pytest.fixture(scope="module")
def probes():
    spec = importlib.util.spec_from_file_location("probes_sp", ROOT / "probes" / "sparse_parity.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_overrides_merge_deeply_and_validate(probes):
    cfg, entry = probes.probe_config("K8_loglen_es")
    sp = cfg["sparse_parity"]
    assert sp["model"]["attn_scale"] == "log_length" and sp["model"]["n_layer"] == 3
    assert sp["train"]["early_stop"]["target_accuracy"] == 0.99 and sp["train"]["batch_size"] == 64
    assert entry["k_train"] == 8 and cfg["results_dir"].endswith(
        "probes/sparse_parity/K8_loglen_es"
    )
    with pytest.raises(SystemExit, match="no probe named"):
        probes.probe_config("nope")


def test_verdict_is_the_longest_prefix_of_good_lengths(probes):
    row = {f"acc_L{length}_k{k}": 1.0 for length in probes.LENGTHS for k in (1, 2)}
    assert probes.verdict(row, 2).startswith("near-perfect to 2l=500")
    row["acc_L200_k2"] = 0.89  # 500 still perfect: the bar must hold at every shorter length
    assert probes.verdict(row, 2) == ">= 0.9 up to 2l=100 only"
    row["acc_L50_k1"] = 0.5
    assert probes.verdict(row, 2).startswith("not learned in distribution")


def test_committed_rows_have_definitions_and_consistent_verdicts(probes):
    import yaml

    table = pd.read_csv(probes.TABLE)
    defined = yaml.safe_load(probes.PROBES.read_text())["probes"]
    assert len(table) >= 5 and set(table["probe"]) <= set(defined)
    for row in table.to_dict("records"):
        assert row["verdict"] == probes.verdict(row, int(row["k_train"])), row["probe"]

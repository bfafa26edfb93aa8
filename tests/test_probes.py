"""The sparse-parity probe runner: overrides merge into the default tier and validate; the verdict
names the longest length where every k_test <= K_train is >= 0.9; every committed row has a
definition and a verdict consistent with its numbers."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from .conftest import ROOT
from .helpers import load_script


@pytest.fixture(scope="module")
def probes():
    return load_script(ROOT / "probes" / "sparse_parity.py", "probes_sp")


def test_probes_score_on_the_evaluation_device(probes, monkeypatch, tmp_path):
    """The model is read and scored where eval_device says (the GPU on a GPU machine), not on the
    CPU by default: the device eval_device names reaches both the read and the model."""
    import torch

    from lengen.model.model import GPTNeoX, ModelConfig

    cfg = ModelConfig(vocab_size=8, n_layer=1, n_head=2, d_model=8)
    model = GPTNeoX(cfg)
    path = tmp_path / "model.pt"
    torch.save(
        {
            "model_config": cfg.to_dict(),
            "state_dict": model.state_dict(),
            "spec": {},
            "steps_run": 1,
            "stop_reason": "steps",
        },
        path,
    )
    asked = []
    read, build = probes.read_model_file, probes.model_from_saved
    monkeypatch.setattr(probes, "eval_device", lambda: "gpu-here")
    monkeypatch.setattr(probes, "read_model_file", lambda p, d: asked.append(d) or read(p, "cpu"))
    monkeypatch.setattr(probes, "model_from_saved", lambda s, d: asked.append(d) or build(s, "cpu"))
    _, scored = probes.scored_model(path)
    assert asked == ["gpu-here", "gpu-here"]
    weights = "embed_in.weight"
    assert torch.equal(scored.state_dict()[weights], model.state_dict()[weights])
    assert not scored.training


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


def test_gpu_acceptance_probes_are_the_gpu_tiers_paper_size_models(probes):
    """benchmarks/gpu_acceptance.sh trains GPU_K8_neox and GPU_PS_ppc_j2: the gpu tier's models
    (12 x 1024, bf16 on CUDA), K_train = 8 and PPC at jump 2, steps cut to the session."""
    scratchpad = load_script(ROOT / "probes" / "scratchpad.py", "probes_ps")
    sp_cfg, sp_entry = probes.probe_config("GPU_K8_neox")
    ps_cfg, ps_entry = scratchpad.probe_config("GPU_PS_ppc_j2")
    for cfg, section in ((sp_cfg, "sparse_parity"), (ps_cfg, "parity_scratchpad")):
        assert cfg["runtime"]["device"] == "cuda" and cfg["runtime"]["precision"] == "bf16"
        model = cfg[section]["model"]
        assert (model["n_layer"], model["d_model"], model["n_head"]) == (12, 1024, 16)
        assert cfg[section]["train"]["steps"] < 15000  # cut from the gpu tier's 15,000
    assert sp_entry["k_train"] == 8 and (ps_entry["variant"], ps_entry["value"]) == ("ppc", 2)


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


def test_the_fused_grid_rows_are_what_the_docs_say():
    """The H200's fused PPC grid (GPU_PS_ppc_fused, benchmarks/measured/2026-11-26-h200/): 16
    rows, one per
    jump x run, all stopped by the budget at step 939; jump 1's 4 runs learned and hold >= 0.9
    to 2l = 60, jumps 2-4 did not learn (<= 0.27 at 2l = 20); each row's verdict its numbers'."""
    scratchpad = load_script(ROOT / "probes" / "scratchpad.py", "probes_ps")
    table = pd.read_csv(scratchpad.TABLE)
    rows = table[table["probe"].str.startswith("GPU_PS_ppc_fused/")]
    assert len(rows) == 16 and set(rows["value"]) == {1, 2, 3, 4}
    assert set(rows["steps_run"]) == {939} and set(rows["stop_reason"]) == {"budget"}
    jump1, later = rows[rows["value"] == 1], rows[rows["value"] > 1]
    assert (jump1[["acc_L20", "acc_L40", "acc_L60"]] >= 0.9).all().all()
    assert later["verdict"].str.startswith("not learned").all() and later["acc_L20"].max() <= 0.27
    for row in rows.to_dict("records"):
        assert row["verdict"] == scratchpad.verdict(row, "parity_scratchpad", 40), row["probe"]


@pytest.fixture(scope="module")
def language():
    return load_script(ROOT / "probes" / "language.py", "probes_nl")


def test_language_probes_validate_and_rows_are_defined(language):
    import yaml

    defined = yaml.safe_load(language.PROBES.read_text())["probes"]
    for name in defined:
        cfg, got = language.probe_config(name)  # every entry merges and validates
        assert got["which"] in ("short", "long"), name
        assert cfg["results_dir"].endswith(f"probes/language/{name}")
    cfg, _ = language.probe_config("NL_docs_short_12k")
    nl = cfg["natural_language"]
    assert nl["short"]["pose_start"] == 8400 and nl["short"]["train"]["batch_size"] == 16
    assert [p["name"] for p in nl["corpus"]["packages"]][-1] == "postgresql-doc-15"
    table = pd.read_csv(language.TABLE)
    assert set(table["probe"]) <= set(defined)
    drop = 1 - table["ppl_128"] / table["ppl_64"]
    assert (abs(drop - table["rel_drop"]) < 1e-9).all()


def test_language_probe_score_known_answers(language):
    """A model that predicts every token uniformly has perplexity = vocabulary size at both
    lengths, no relative drop, and L_short - L_long = 0."""
    import numpy as np
    import torch

    class Uniform(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))
            self.embed_out = lambda h: torch.zeros(*h.shape[:-1], 50)

        def forward(self, x, ids):
            return torch.zeros(*x.shape, 50) + self.w

        def hidden(self, x, ids, mask=None):
            return torch.zeros(*x.shape, 4)

    held_out = np.random.default_rng(0).integers(0, 50, 129 * 256 + 128 * 256)
    out = language.score(Uniform(), held_out, 64, 128)
    assert out["ppl_64"] == pytest.approx(50, rel=1e-5) and out["ppl_128"] == pytest.approx(
        50, rel=1e-5
    )
    assert out["rel_drop"] == pytest.approx(0, abs=1e-5)
    assert out["mean_short_minus_long"] == pytest.approx(0, abs=1e-6)
    assert out["loss_pos1"] == pytest.approx(np.log(50), rel=1e-5)
    assert out["gain_pos65"] == pytest.approx(0, abs=1e-6) and "gain_pos49" not in out


def test_language_probe_copying_columns(language):
    """An untrained model copies nothing (copy gain ~0) and its head scores are attention
    masses; the committed copying rows are in the same ranges."""
    import torch

    from lengen.model.model import GPTNeoX, ModelConfig

    torch.manual_seed(0)
    model = GPTNeoX(ModelConfig(vocab_size=64, n_layer=2, n_head=2, d_model=16)).eval()
    out = language.copying(model, short_len=16)
    assert set(out) == {"copy_gain", "max_prev_token", "max_induction"}
    assert abs(out["copy_gain"]) < 0.05
    assert 0 < out["max_prev_token"] <= 1 and 0 < out["max_induction"] <= 1
    table = pd.read_csv(ROOT / "probes" / "language_probes.csv").dropna(subset=["copy_gain"])
    assert len(table) >= 8
    assert table[["max_prev_token", "max_induction"]].stack().between(0, 1).all()


def test_append_row_replaces_only_the_row_with_the_same_key(probes, tmp_path):
    table = tmp_path / "t.csv"
    for probe, step, value in [("a", 1, 0.1), ("a", 2, 0.2), ("b", 1, 0.3), ("a", 1, 0.4)]:
        probes.append_row(table, {"probe": probe, "step": step, "v": value}, key=("probe", "step"))
    got = pd.read_csv(table).sort_values(["probe", "step"])
    assert got.to_dict("records") == [
        {"probe": "a", "step": 1, "v": 0.4},
        {"probe": "a", "step": 2, "v": 0.2},
        {"probe": "b", "step": 1, "v": 0.3},
    ]
    probes.append_row(table, {"probe": "a", "step": 9, "v": 1.0})  # default key: the probe
    assert pd.read_csv(table).to_dict("records") == [
        {"probe": "b", "step": 1, "v": 0.3},
        {"probe": "a", "step": 9, "v": 1.0},
    ]


def test_trajectory_rows_belong_to_tracking_probes_at_their_steps(language):
    import yaml

    if not language.TRAJECTORY.exists():
        pytest.skip("no tracked probe has run yet")
    defined = yaml.safe_load(language.PROBES.read_text())["probes"]
    for row in pd.read_csv(language.TRAJECTORY).to_dict("records"):
        every = defined[row["probe"]]["track_every"]
        assert row["step"] % every == 0, row
        assert abs(1 - row["ppl_128"] / row["ppl_64"] - row["rel_drop"]) < 1e-9


def test_a_fused_group_probe_trains_as_one_and_scores_each_member(tmp_path, monkeypatch):
    """A probe with `values` and `runs` (GPU_PS_ppc_fused: Fig. 2's PPC grid on a GPU) trains its
    members as one fused group and appends one scored row per member, NAME/<value>/seed<run>."""
    import yaml

    from lengen.config.config import validate

    scratchpad = load_script(ROOT / "probes" / "scratchpad.py", "probes_ps")
    cfg = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    cfg["results_dir"] = str(tmp_path / "results")
    cfg = validate(cfg)
    entry = {"experiment": "parity_scratchpad", "variant": "ppc", "values": [1, 2], "runs": 2}
    monkeypatch.setattr(scratchpad, "LENGTHS", {"parity_scratchpad": (8, 16)})
    monkeypatch.setattr(scratchpad, "N_EXAMPLES", 4)
    table = tmp_path / "probes.csv"
    rows = scratchpad.run_group("G", cfg, entry, table)
    names = ["G/1/seed0", "G/1/seed1", "G/2/seed0", "G/2/seed1"]
    assert [r["probe"] for r in rows] == names
    assert [r["value"] for r in rows] == [1, 1, 2, 2] and {r["steps_run"] for r in rows} == {4}
    assert list(pd.read_csv(table)["probe"]) == names
    assert all((tmp_path / "results" / n.split("/", 1)[1] / "model.pt").is_file() for n in names)
    # scored one value at a time as a fused group (tests/test_fused.py: equal to one by one)
    for row, (value, seed) in zip(rows, [(1, 0), (1, 1), (2, 0), (2, 1)], strict=True):
        _, model = scratchpad.scored_model(
            tmp_path / "results" / f"{value}" / f"seed{seed}" / "model.pt"
        )
        spec = json.loads(
            (tmp_path / "results" / f"{value}" / f"seed{seed}" / "spec.json").read_text()
        )
        alone = scratchpad.score(model.eval(), spec)
        assert {k: row[k] for k in alone} == alone
    gpu_cfg, gpu_entry = scratchpad.probe_config("GPU_PS_ppc_fused")
    section = gpu_cfg["parity_scratchpad"]
    assert set(gpu_entry["values"]) <= set(section["jumps"]) and gpu_entry["runs"] >= 4
    assert (section["model"]["n_layer"], section["model"]["d_model"]) == (12, 1024)


def test_a_probe_base_at_a_commit_is_merged_with_its_base_there(probes):
    """`base: config/gpu.yaml@COMMIT` reads the tier as it was at that commit, its `extends`
    chain merged from the same commit (gpu.yaml extends paper.yaml); a path that commit does not
    have stops the probe naming the base."""
    from lengen.config.config import read_tier

    at_head = probes.read_base("config/gpu.yaml@HEAD")
    assert "extends" not in at_head
    paper = read_tier(ROOT / "config" / "paper.yaml")
    assert at_head["parity_scratchpad"] == paper["parity_scratchpad"]
    assert probes.read_base("config/gpu.yaml") == read_tier(ROOT / "config" / "gpu.yaml")
    with pytest.raises(SystemExit, match="config/nothing.yaml@HEAD"):
        probes.read_base("config/nothing.yaml@HEAD")


def test_the_size_ladder_reads_its_runs_worst_k_per_length_and_draws(tmp_path):
    """probes/ladder.py: only the ladder's probes, each run's worst accuracy over k_test <=
    K_train at each tested length, its size and seed from its name; the figure is drawn from
    the committed table whatever number of its runs has finished."""
    ladder = load_script(ROOT / "probes" / "ladder.py")
    row = {"k_train": 2, "params": 1000, "steps_run": 10}
    for length in ladder.LENGTHS:
        row |= {
            f"acc_L{length}_k1": 1.0,
            f"acc_L{length}_k2": 0.5 + length / 1000,
            f"acc_L{length}_k3": 0.0,
        }  # k_test 3 > K_train: not read
    table = pd.DataFrame([{"probe": "K8_ladder_3x64_s2", **row}, {"probe": "K8_base", **row}])
    d = ladder.ladder_rows(table)
    assert set(d["size"]) == {"3 x 64"} and set(d.seed) == {2}
    assert d.set_index("length").worst.to_dict() == {50: 0.55, 100: 0.6, 200: 0.7, 500: 1.0}
    drawn = ladder.draw(tmp_path / "ladder.png")
    assert (tmp_path / "ladder.png").stat().st_size > 10_000
    assert set(drawn.get("size", [])) <= {"2 x 32", "3 x 64", "4 x 128"}


def test_imported_runs_are_judged_by_the_training_range_they_were_trained_with(
    tmp_path, monkeypatch
):
    """`scratchpad.py import`: each seed of one model of a tier's tidy table becomes a row
    NAME/<value>/seed<seed>, judged against the longest training length of the tier file as of
    the commit in the table (a variant's own range where it sets one), not today's."""
    import lengen.config.config as config

    scratchpad = load_script(ROOT / "probes" / "scratchpad.py", "probes_ps")
    monkeypatch.setattr(scratchpad, "TABLE", tmp_path / "probes.csv")
    asked = []

    def tier_at(path, commit, root):
        asked.append((path, commit))
        section = {
            "train_max_len": 40,
            "jumps": [1],
            "variants": {
                "abs": {"scheme": "absolute", "runs": 2, "section": {"train_max_len": 20}}
            },
        }
        return {"parity_scratchpad": section}

    monkeypatch.setattr(config, "read_tier_at", tier_at)
    accuracy = {20: 1.0, 40: 0.5, 60: 0.0}  # learned up to 20, the variant's own range
    table = pd.DataFrame(
        [
            {
                "experiment": "parity_scratchpad",
                "variant": "abs",
                "jump": 1,
                "seed": seed,
                "run": f"abs/k1/seed{seed}",
                "length": n,
                "accuracy": acc - seed * 0.5,
                "n": 8,
                "steps_run": 100,
                "stop_reason": "steps",
                "config_hash": "h",
                "git_commit": "abc1234def-dirty",
                "versions": "v",
            }
            for seed in (0, 1)
            for n, acc in accuracy.items()
        ]
    )
    table.to_csv(tmp_path / "t.csv", index=False)
    rows = scratchpad.import_runs("OLD", tmp_path / "t.csv", "abs", 1)
    assert asked == [("config/config.yaml", "abc1234def")]
    assert [r["probe"] for r in rows] == ["OLD/1/seed0", "OLD/1/seed1"]
    assert rows[0]["verdict"] == ">= 0.9 up to 20 (1.0x the longest training length)"
    assert rows[1]["verdict"].startswith("not learned in distribution (worst 0.50 at lengths <= 20")
    assert list(pd.read_csv(tmp_path / "probes.csv").probe) == ["OLD/1/seed0", "OLD/1/seed1"]
    with pytest.raises(SystemExit, match="no run of abs at jump 2"):
        scratchpad.import_runs("OLD", tmp_path / "t.csv", "abs", 2)

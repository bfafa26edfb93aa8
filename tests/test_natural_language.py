"""Natural language (Sec. 5.3): C4-format corpus, C4 task with PoSE, Table 1 windows, and the
leave-one-out masks of Eq. (6)."""

from __future__ import annotations

import copy
import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from lengen.analysis import influence, perplexity
from lengen.config.config import ConfigError, validate
from lengen.core import contexts
from lengen.data import corpus, tokens
from lengen.model.model import GPTNeoX, ModelConfig
from lengen.tasks import natural_language, parse_spec
from tests.conftest import ROOT
from tests.helpers import edited, make_spec

LONG, SHORT = 16, 6  # Lbar, L for tiny checks


@pytest.fixture(scope="module")
def model() -> GPTNeoX:
    torch.manual_seed(0)
    return GPTNeoX(ModelConfig(vocab_size=50, n_layer=2, n_head=2, d_model=32)).eval()


def _seq(seed: int = 0) -> torch.Tensor:
    return torch.as_tensor(np.random.default_rng(seed).integers(0, 50, LONG))


def test_masked_token_has_no_influence_and_positions_stay(model):
    x = _seq()
    keep = torch.ones(1, LONG - 1, dtype=torch.bool)
    keep[0, 3] = False
    changed = x.clone()
    changed[3] = (x[3] + 1) % 50
    base = influence.target_logprob(model, x, keep)
    torch.testing.assert_close(influence.target_logprob(model, changed, keep), base)
    # unmasked, the same change moves the prediction
    full = torch.ones_like(keep)
    assert not torch.allclose(
        influence.target_logprob(model, changed, full), influence.target_logprob(model, x, full)
    )


def test_l_long_is_the_plain_loss_on_the_full_window(model):
    x = _seq(1)
    keeps = torch.as_tensor(contexts.context_keeps(LONG, SHORT, [2, 4]))
    l_short, l_long, l_sparse = (-influence.target_logprob(model, x, keeps)).tolist()
    with torch.no_grad():
        logits = model(x[None, :-1], torch.arange(1, LONG)[None])[0, -1]
    plain = torch.nn.functional.cross_entropy(logits[None], x[None, -1]).item()
    assert l_long == pytest.approx(plain, abs=1e-5)
    assert l_short != pytest.approx(l_long) and l_sparse != pytest.approx(l_short)


def test_analyse_assembles_the_three_losses_per_model_pair(model):
    torch.manual_seed(1)
    other = GPTNeoX(ModelConfig(vocab_size=50, n_layer=2, n_head=2, d_model=32)).eval()
    models = {"h_short": model, "h_long": other}
    examples = np.stack([_seq(s).numpy() for s in (3, 4)])
    table = influence.analyse(models, examples, SHORT, k=2)
    assert list(table.columns) == [
        "example",
        "scored_by",
        "chosen_by",
        "J",
        "L_short",
        "L_long",
        "L_short_sparse",
        "short_minus_long",
        "short_minus_sparse",
    ]
    pairs = [(i, s, b) for i in (0, 1) for s in models for b in models]
    assert list(zip(table.example, table.scored_by, table.chosen_by, strict=True)) == pairs
    loo = torch.as_tensor(contexts.loo_keep(LONG, SHORT))
    for row in table.itertuples():
        x = torch.as_tensor(examples[row.example])
        J = influence.choose_influential(influence.target_logprob(models[row.chosen_by], x, loo), 2)
        assert row.J == " ".join(map(str, J)) and len(J) == 2
        keeps = torch.as_tensor(contexts.context_keeps(LONG, SHORT, J))
        want = (-influence.target_logprob(models[row.scored_by], x, keeps)).tolist()
        assert [row.L_short, row.L_long, row.L_short_sparse] == pytest.approx(want)
        assert row.short_minus_long == pytest.approx(want[0] - want[1])
        assert row.short_minus_sparse == pytest.approx(want[0] - want[2])
        assert row.L_long > 0  # a loss, not a log-probability


def test_influential_ties_go_to_the_earliest_positions():
    logp = torch.tensor([0.5, 0.1, 0.1, 0.1, 0.9] + [0.1] * 23)  # ties from position 2 on
    assert influence.choose_influential(logp, 3) == [2, 3, 4]
    assert influence.choose_influential(torch.tensor([0.3, 0.2, 0.4]), 1) == [2]


def test_context_masks_are_fig5():
    keep = contexts.context_keeps(8, 2, [2, 4]).astype(int).tolist()
    assert keep == [[0, 0, 0, 0, 0, 1, 1], [1] * 7, [0, 1, 0, 1, 0, 1, 1]]


def test_batched_leave_one_out_equals_separate_forwards(model, device):
    model = copy.deepcopy(model).to(device)  # the module-scoped fixture stays on the CPU
    x = _seq(2).to(device)
    keep = torch.as_tensor(contexts.loo_keep(LONG, SHORT), device=device)
    assert keep.shape == (LONG - SHORT - 1, LONG - 1) and (~keep).sum() == LONG - SHORT - 1
    batched = influence.target_logprob(model, x, keep)
    single = torch.cat([influence.target_logprob(model, x, row[None]) for row in keep])
    tol = 1e-5 if device == "cpu" else 1e-4  # CUDA picks kernels by batch size: fp32 rounding
    torch.testing.assert_close(batched, single, rtol=tol, atol=tol)
    bounded = influence.target_logprob(model, x, keep, rows_per_pass=3)  # the memory bound
    torch.testing.assert_close(bounded, batched, rtol=tol, atol=tol)
    # with nothing masked, the masked path equals the model's own causal forward
    none = torch.ones(3, LONG - 1, dtype=torch.bool, device=device)
    with torch.no_grad():
        ids = torch.arange(1, LONG, device=device)[None]
        plain = torch.log_softmax(model(x[None, :-1], ids)[0, -1], -1)
    torch.testing.assert_close(
        influence.target_logprob(model, x, none), plain[x[-1]].repeat(3), rtol=tol, atol=tol
    )
    J = influence.choose_influential(batched, 3)
    assert J == sorted((torch.argsort(batched.cpu())[:3] + 1).tolist())


def test_perplexity_windows_score_the_same_targets():
    chunks = np.arange(2 * 9).reshape(2, 9)  # Lbar = 8
    w4 = perplexity.split_windows(chunks, 4)
    assert w4.shape == (4, 5)
    targets4 = np.sort(w4[:, 1:].ravel())
    targets8 = np.sort(perplexity.split_windows(chunks, 8)[:, 1:].ravel())
    assert (targets4 == targets8).all()


class Unigram(torch.nn.Module):
    """A language model with known NLLs: p(next = v) = probs[v] whatever the context. It checks
    that it is fed true position IDs 1..T (Table 1 windows start fresh)."""

    def __init__(self, probs: np.ndarray):
        super().__init__()
        self.logp = torch.nn.Parameter(torch.log(torch.as_tensor(probs, dtype=torch.float32)))

    def forward(self, x, ids):
        assert (ids == torch.arange(1, x.shape[1] + 1)).all(), ids
        return self.logp.expand(*x.shape, -1)


def test_perplexity_known_answers(monkeypatch):
    probs = np.array([0.5, 0.25, 0.125, 0.125])
    tokens = np.random.default_rng(0).integers(0, 4, 3 * 17 + 5)
    model = Unigram(probs)
    chunks = tokens[: 3 * 17].reshape(3, 17)  # Lbar = 16
    nll = perplexity.window_nll(model, perplexity.split_windows(chunks, 4), batch_size=5)
    assert nll.shape == (12, 4)
    # every target token of chunk c (tokens 1..16 of it) scored once, each -log p(token)
    expect = -np.log(probs)[chunks[:, 1:]].mean(axis=1)
    assert np.allclose(perplexity.chunk_nll(nll, 3), expect, atol=1e-6)
    saved = {
        "spec": make_spec("natural_language", task={"context": 8}, seed=3).source,
        "steps_run": 7,
        "stop_reason": "steps",
    }

    def read(path, device):
        assert path == Path("m.pt") and device == "cpu"
        return saved

    def build(got, device):
        assert got is saved and device == "cpu"
        return model

    monkeypatch.setattr(perplexity, "read_model_file", read)
    monkeypatch.setattr(perplexity, "model_from_saved", build)
    table, per_chunk = perplexity.perplexity_table({"short": Path("m.pt")}, tokens, [4, 16], 3, 2)
    assert table[
        ["model", "eval_length", "n_tokens", "train_context", "pose", "seed", "steps_run"]
    ].to_dict("records") == [
        {
            "model": "h_short",
            "eval_length": n,
            "n_tokens": 48,
            "train_context": 8,
            "pose": False,
            "seed": 3,
            "steps_run": 7,
        }
        for n in (4, 16)
    ]
    assert np.allclose(table.perplexity, np.exp(expect.mean()), rtol=1e-6)  # context-free model
    assert table.paper_perplexity.isna().all()
    assert per_chunk.chunk.tolist() == [0, 1, 2, 0, 1, 2]
    assert per_chunk.model.tolist() == ["h_short"] * 6
    assert per_chunk.eval_length.tolist() == [4, 4, 4, 16, 16, 16]
    assert per_chunk.index.tolist() == list(range(6))
    assert np.allclose(per_chunk.nll, np.tile(expect, 2), atol=1e-6)
    long_text = np.random.default_rng(1).integers(0, 4, 2 * 129)
    saved["spec"] = make_spec(
        "natural_language", task={"context": 8, "pose_start": 700}, seed=3
    ).source  # h_short's PoSE from step 700: flagged
    table, _ = perplexity.perplexity_table({"long": Path("m.pt")}, long_text, [64, 128], 2, 2)
    assert table.paper_perplexity.tolist() == [17.62, 14.49]  # Table 1, h_long
    assert table.pose.tolist() == [True, True]
    with pytest.raises(ValueError, match="eval length 5 does not divide 16"):
        perplexity.split_windows(chunks, 5)


def _fake_package(root, name):
    """An unpacked package with an HTML page, a text file and a fortune file."""
    base = root / name
    (base / "html").mkdir(parents=True, exist_ok=True)
    (base / "html" / "a.html").write_text(
        "<html><head><title>t</title><script>var x;</script></head><body><p>First paragraph "
        "of the page.</p><p>Second paragraph, &amp; more words.</p></body></html>"
    )
    (base / "doc.txt").write_text("A plain text document.\n\nWith two paragraphs here.\n")
    (base / "fortunes").write_text("One fortune is here.\n%\nAnother fortune, words.\n%\n")
    return base, "1.0-1"


def test_corpus_builder_writes_c4_shards_the_loader_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus, "fetch_package", lambda name, workdir: _fake_package(workdir, name))
    cfg = {
        "source": "debian",
        "validation_fraction": 0.3,
        "max_doc_chars": 3000,
        "docs_per_shard": 2,
        "packages": [
            {"name": "pkg", "glob": "html/*.html", "format": "html"},
            {"name": "pkg", "glob": "*.txt", "format": "text"},
            {"name": "pkg", "glob": "fortunes", "format": "fortune"},
        ],
    }
    manifest = corpus.build_from_debian(cfg, tmp_path / "c4", seed=0)
    files = sorted(p.name for p in (tmp_path / "c4").glob("*.json.gz"))
    assert all(re.fullmatch(r"c4-(train|validation)\.\d{5}-of-\d{5}\.json\.gz", f) for f in files)
    rows = []
    for f in (tmp_path / "c4").glob("*.json.gz"):
        rows += [json.loads(line) for line in gzip.open(f, "rt")]
    assert all(set(r) == {"text", "timestamp", "url"} for r in rows)
    texts = {r["text"] for r in rows}
    assert "First paragraph of the page.\nSecond paragraph, & more words." in texts
    assert "One fortune is here." in texts and not any("var x" in t for t in texts)
    loaded = [t for s in corpus.SPLITS for t in corpus.read_documents("debian", s, tmp_path / "c4")]
    assert sorted(loaded) == sorted(texts) and len(loaded) == 4
    assert sum(p["documents"] for p in manifest["packages"]) == 4
    assert corpus.shuffled(list(range(50)), 0, "train") == corpus.shuffled(
        list(range(50)), 0, "train"
    )
    assert corpus.shuffled(list(range(50)), 0, "train") != list(range(50))  # no package order
    assert sorted(corpus.shuffled(list(range(50)), 1, "validation")) == list(range(50))


def test_c4_task_windows_and_pose_switch(tmp_path):
    tokens = np.arange(1000, dtype=np.uint16)
    tokens.tofile(tmp_path / "train.bin")
    (tmp_path / "meta.json").write_text(json.dumps({"vocab_size": 32000}))
    spec = make_spec(
        "natural_language",
        task={
            "context": 64,
            "l_max": 129,
            "pose_start": 5,
            "train_tokens": str(tmp_path / "train.bin"),
        },
    )
    assert natural_language.vocab_size(spec) == 32000
    before = natural_language.train_batch(spec, np.random.default_rng(0), 4)
    assert before.tokens.shape == (4, 65)
    assert (np.diff(before.tokens, axis=1) == 1).all()  # contiguous windows of the token file
    assert (before.position_ids == np.arange(1, 66)).all() and before.target_mask[:, 0].sum() == 0
    after = natural_language.train_batch(spec, np.random.default_rng(0), 5)
    assert not (after.position_ids == np.arange(1, 66)).all()
    fed = after.position_ids[:, :-1]  # the IDs the model reads (the last token is a label)
    assert fed.min() >= 1 and fed.max() <= 128
    many = natural_language.train_batch(spec.with_batch_size(3000), np.random.default_rng(1), 5)
    assert many.position_ids[:, :-1].max() == 128  # the fed IDs reach Lbar, as at test
    assert (np.diff(after.position_ids, axis=1) >= 1).all()  # PoSE: increasing, one jump
    assert before.tokens.dtype == np.int64  # token IDs for the embedding, from uint16 on disk


def test_c4_repeat_fraction_diagnostic_repeats_windows(tmp_path, smoke_config):
    """repeat_fraction (a diagnostic, not the paper): that fraction of windows repeats itself
    from a copy distance d in [length / 8, length / 2] on; absent (the paper), the spec and the
    batches are as before."""
    natural_language._tokens.cache_clear()
    np.arange(5000, dtype=np.uint16).tofile(tmp_path / "train.bin")
    task = {"context": 32, "l_max": 65, "train_tokens": str(tmp_path / "train.bin")}
    plain = make_spec("natural_language", task=task, train={"batch_size": 400})
    copied = make_spec(
        "natural_language", task=task | {"repeat_fraction": 0.25}, train={"batch_size": 400}
    )
    a = natural_language.train_batch(plain, np.random.default_rng(0), 0).tokens
    b = natural_language.train_batch(copied, np.random.default_rng(0), 0).tokens
    assert (a[:, 0] == b[:, 0]).all() and (np.diff(a, axis=1) == 1).all()  # the same windows
    rows = (b != a).any(axis=1)
    assert 0.15 < rows.mean() < 0.35  # ~ a quarter of the windows
    assert (b[~rows] == a[~rows]).all()
    distances = set()
    for row, orig in zip(b[rows], a[rows], strict=True):
        d = int(np.argmax(np.diff(row) != 1)) + 1  # where the window jumps back to its start
        assert 33 // 8 <= d <= 33 // 2
        assert (row[:d] == orig[:d]).all() and (row[d:] == orig[: 33 - d]).all()
        distances.add(d)
    assert len(distances) > 5  # random distances, not one
    assert "repeat_fraction" not in natural_language.train_spec(smoke_config, "short")["task"]
    with_key = smoke_config | {
        "natural_language": smoke_config["natural_language"] | {"repeat_fraction": 0.5}
    }
    assert natural_language.train_spec(with_key, "long")["task"]["repeat_fraction"] == 0.5
    natural_language._tokens.cache_clear()


def test_c4_windows_start_anywhere_in_the_file(tmp_path):
    task = {"context": 4, "l_max": 9, "train_tokens": str(tmp_path / "train.bin")}
    spec = make_spec("natural_language", task=task, train={"batch_size": 64})
    for n_tokens, starts in ((5, {0}), (6, {0, 1}), (7, {0, 1, 2})):
        natural_language._tokens.cache_clear()
        np.arange(n_tokens, dtype=np.uint16).tofile(tmp_path / "train.bin")
        got = natural_language.train_batch(spec, np.random.default_rng(0), 0).tokens[:, 0]
        assert set(got.tolist()) == starts  # the first and the last possible window
    natural_language._tokens.cache_clear()
    np.arange(4, dtype=np.uint16).tofile(tmp_path / "train.bin")
    with pytest.raises(ValueError, match="train.bin: 4 tokens, need at least 5"):
        natural_language.train_batch(spec, np.random.default_rng(0), 0)
    natural_language._tokens.cache_clear()


def test_config_checks_name_the_key(smoke_config):
    cfg = copy.deepcopy(smoke_config)
    cfg["natural_language"]["short_context"] = 128
    with pytest.raises(ConfigError, match="natural_language.short_context"):
        validate(cfg)
    cfg = copy.deepcopy(smoke_config)
    cfg["natural_language"]["tokenizer"] = {"source": "hub"}
    with pytest.raises(ConfigError, match="natural_language.tokenizer.name"):
        validate(cfg)
    cfg["natural_language"]["tokenizer"] = {"source": "corpus_bpe"}
    with pytest.raises(ConfigError, match="natural_language.tokenizer.vocab_size"):
        validate(cfg)


def test_corpus_bpe_tokenizer_round_trips_and_is_deterministic(tmp_path):
    """The corpus-trained byte-level BPE has exactly vocab_size tokens, EOS as a special token,
    decodes what it encodes (any byte, no unknown token), learns the corpus's frequent words as
    single tokens, and is the same when trained twice on the same texts."""
    texts = ["the parser reads the config file; the parser writes the config file."] * 50 + [
        "git commit --amend rewrites the last commit.",
        "naïve café: ünïcödé and emoji \u2603",
    ]
    tok = tokens.prepare_tokenizer(
        {"source": "corpus_bpe", "vocab_size": 300}, tmp_path / "t", iter(texts)
    )
    assert len(tok) == 300 and tok.convert_ids_to_tokens(tok.eos_token_id) == tokens.EOS
    for text in texts[-3:] + ["words never seen: zyxq ☃ \t tabs"]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text and tok.eos_token_id not in ids
    assert len(tok("the parser", add_special_tokens=False)["input_ids"]) <= 3
    again = tokens.train_corpus_bpe(iter(texts), 300)
    assert again.get_vocab() == tok.get_vocab()
    from transformers import AutoTokenizer

    saved = AutoTokenizer.from_pretrained(str(tmp_path / "t"))  # saved in HF format
    assert (
        saved("the config", add_special_tokens=False)["input_ids"]
        == tok("the config", add_special_tokens=False)["input_ids"]
    )
    with pytest.raises(ValueError, match="tokenizer.vocab_size"):
        tokens.prepare_tokenizer({"source": "corpus_bpe"}, tmp_path / "u", iter(texts))


def test_leave_one_out_on_a_hugging_face_model_matches_the_in_house_one(model, tmp_path):
    """The same GPT-NeoX weights saved as a local transformers directory give the same Eq. (6)
    log-probabilities through HFCausalLM (custom 4D mask, position IDs kept) as the in-house
    model: every leave-one-out row and the three Fig. 5 contexts."""
    from lengen.model.hf import to_transformers

    to_transformers(model).save_pretrained(tmp_path / "neox")
    hf = influence.HFCausalLM.from_pretrained(tmp_path / "neox")
    x = _seq(3)
    for keep in (
        torch.as_tensor(contexts.loo_keep(LONG, SHORT)),
        torch.as_tensor(contexts.context_keeps(LONG, SHORT, [2, 5])),
    ):
        ours = influence.target_logprob(model, x, keep)
        theirs = influence.target_logprob(hf, x, keep)
        torch.testing.assert_close(theirs, ours, atol=2e-5, rtol=1e-5)
    # in bf16 (a 1.3B model's dtype) the mask follows the weights' dtype, as attention needs
    hf.hf.to(torch.bfloat16)
    half = influence.target_logprob(hf, x, keep)
    torch.testing.assert_close(half.float(), ours, atol=0.15, rtol=0.05)


def test_lengen_influence_runs_on_a_local_llama(tmp_path, capsys):
    """`lengen influence` on a tiny randomly initialised Llama built from a config (no hub): a
    masked token cannot move the prediction, and the table has influence_loo.csv's columns."""
    import pandas as pd
    from transformers import LlamaConfig, LlamaForCausalLM

    from lengen import cli

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    LlamaForCausalLM(config).save_pretrained(tmp_path / "llama")
    hf = influence.HFCausalLM.from_pretrained(tmp_path / "llama")
    x, keep = _seq(1), torch.as_tensor(contexts.loo_keep(LONG, SHORT))
    y = x.clone()
    y[4] = (y[4] + 1) % 50  # row 4 masks token 5 (index 4)
    torch.testing.assert_close(
        influence.target_logprob(hf, x, keep)[4], influence.target_logprob(hf, y, keep)[4]
    )
    np.random.default_rng(0).integers(0, 50, 200).astype(np.uint16).tofile(tmp_path / "t.bin")
    out = tmp_path / "loo.csv"
    argv = [
        "influence",
        "--model",
        f"llama={tmp_path / 'llama'}",
        "--tokens",
        str(tmp_path / "t.bin"),
    ]
    argv += ["--long-len", "24", "--short-len", "12", "--k", "3", "--n-examples", "4"]
    cli.main([*argv, "--out", str(out)])
    table = pd.read_csv(out)
    assert len(table) == 4 and set(table.scored_by) == {"llama"}
    assert {"J", "L_short", "L_long", "L_short_sparse", "short_minus_sparse"} <= set(table)
    assert all(len(j.split()) == 3 for j in table.J)
    bounded = tmp_path / "bounded.csv"  # the memory bound: 2 of the 11 masks per forward
    cli.main([*argv, "--masks-per-pass", "2", "--out", str(bounded)])
    again = pd.read_csv(bounded)
    assert list(again.J) == list(table.J)
    np.testing.assert_allclose(again.L_short_sparse, table.L_short_sparse, rtol=1e-5, atol=1e-6)
    with pytest.raises(SystemExit):
        cli.main(
            [
                "influence",
                "--model",
                str(tmp_path / "llama"),
                "--tokens",
                str(tmp_path / "t.bin"),
                "--long-len",
                "24",
                "--short-len",
                "22",
                "--out",
                str(out),
            ]
        )
    assert "--short-len must leave more than k" in capsys.readouterr().err


@pytest.mark.parametrize("scheme", ["rope_pose", "nope", "alibi"])
def test_language_models_train_and_score_in_every_scheme(scheme, smoke_config, tmp_path):
    """natural_language.scheme: RoPE + PoSE (the paper), NoPE or ALiBi for both models; only
    rope_pose moves h_short's IDs (PoSE), the others feed true IDs at every step; each trains
    and is scored by Table 1's perplexity."""
    from lengen.core import tracking
    from lengen.train.train import train

    cfg = copy.deepcopy(smoke_config)
    cfg["results_dir"] = str(tmp_path / "results")
    cfg["natural_language"]["scheme"] = scheme
    cfg = validate(cfg)
    data = tmp_path / "results" / "natural_language" / "tokens"
    data.mkdir(parents=True)
    np.random.default_rng(0).integers(0, 60, 4000).astype(np.uint16).tofile(data / "train.bin")
    (data / "meta.json").write_text(json.dumps({"vocab_size": 60}))
    source = natural_language.train_spec(cfg, "short")
    spec = parse_spec(source)
    want = {"rope_pose": "rope", "nope": "nope", "alibi": "alibi"}[scheme]
    assert spec.model["position"] == want
    assert (spec.task.pose_start is not None) == (scheme == "rope_pose")
    late = natural_language.train_batch(spec, np.random.default_rng(0), spec.train.steps - 1)
    late = late.position_ids
    assert (late == np.arange(1, spec.task.context + 2)).all() != (scheme == "rope_pose")
    tracking.prepare_store(source["tracking"]["uri"], [source["tracking"]["experiment"]])
    path = train({**source, "train": {**source["train"], "steps": 2}}, tmp_path / "m")
    text = np.random.default_rng(1).integers(0, 60, 3 * 129)
    table, _ = perplexity.perplexity_table({"short": path}, text, [64, 128], 2, 2)
    assert (
        np.isfinite(table.perplexity).all() and table.pose.tolist() == [scheme == "rope_pose"] * 2
    )


def test_sliding_windows_hold_the_last_l_tokens_before_each_target_beyond_l():
    chunks = np.arange(2 * 9).reshape(2, 9)  # Lbar = 8, L = 3: targets 4..8 of each chunk
    w = perplexity.sliding_windows(chunks, 3)
    assert w.shape == (2 * 5, 4)
    assert w[0].tolist() == [1, 2, 3, 4] and w[4].tolist() == [5, 6, 7, 8]
    assert w[5].tolist() == [10, 11, 12, 13]


class LastToken(torch.nn.Module):
    """Reads only the previous token (a bigram model): a window loses nothing."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(50, 50)

    def forward(self, x, ids):
        return self.table(x)


def test_window_table_tells_a_model_that_reads_far_tokens_from_one_that_does_not(model):
    chunks = np.random.default_rng(0).integers(0, 50, (3, LONG + 1))
    torch.manual_seed(0)
    bigram = perplexity.window_table(LastToken(), chunks, SHORT, 4, progress=False)
    per = bigram.pivot(index="chunk", columns="context", values="nll")
    assert np.allclose(per["full"], per["window"], atol=1e-5)
    assert set(bigram.n_targets) == {LONG - SHORT}
    assert set(bigram.context_tokens) == {LONG, SHORT}
    far = perplexity.window_table(model, chunks, SHORT, 4, progress=False)
    per = far.pivot(index="chunk", columns="context", values="nll")
    assert not np.allclose(per["full"], per["window"], atol=1e-4)
    # the full-context column is the Table 1 NLL of the same targets at eval length Lbar
    nll = perplexity.window_nll(model, chunks, 4)[:, SHORT:].mean(axis=1)
    assert np.allclose(per["full"], nll, atol=1e-6)


def test_lengen_influence_refuses_bad_inputs_in_one_line(tmp_path, capsys, monkeypatch):
    """issue 47's CLI drills: a Latin-1 text, a cut config.json, a cut model.safetensors, token
    ids beyond the vocabulary and a --long-len beyond the model's positions are each one
    argparse error naming the file or argument, never a traceback."""
    import shutil

    from transformers import LlamaConfig, LlamaForCausalLM

    from lengen import cli

    config = LlamaConfig(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    good = tmp_path / "llama"
    LlamaForCausalLM(config).save_pretrained(good)
    tokens = tmp_path / "t.bin"
    np.random.default_rng(0).integers(0, 50, 200).astype(np.uint16).tofile(tokens)

    def refused(*args: str) -> str:
        with pytest.raises(SystemExit):
            cli.main(
                [
                    "influence",
                    *args,
                    "--long-len",
                    "24",
                    "--short-len",
                    "12",
                    "--k",
                    "3",
                    "--n-examples",
                    "2",
                    "--out",
                    str(tmp_path / "o.csv"),
                ]
            )
        return capsys.readouterr().err

    latin = tmp_path / "latin.txt"
    latin.write_bytes("café crème ".encode("latin-1") * 20)
    assert f"--text {latin}: not UTF-8 text" in refused("--model", str(good), "--text", str(latin))
    cut = tmp_path / "cut"
    shutil.copytree(good, cut)
    (cut / "config.json").write_text((good / "config.json").read_text()[:40])
    assert f"{cut / 'config.json'}: not readable JSON" in refused(
        "--model", str(cut), "--tokens", str(tokens)
    )
    shutil.rmtree(cut)
    shutil.copytree(good, cut)
    weights = next(cut.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:20])
    err = refused("--model", str(cut), "--tokens", str(tokens))
    assert f"{weights}: not a readable safetensors file" in err
    big = tmp_path / "big.bin"
    np.full(200, 60, dtype=np.uint16).tofile(big)
    err = refused("--model", str(good), "--tokens", str(big))
    assert f"--tokens {big}: token id 60 is beyond llama's vocabulary of 50" in err
    with pytest.raises(SystemExit):
        cli.main(
            [
                "influence",
                "--model",
                str(good),
                "--tokens",
                str(tokens),
                "--long-len",
                "100",
                "--short-len",
                "12",
                "--out",
                str(tmp_path / "o.csv"),
            ]
        )
    assert "--long-len 100 is beyond llama's 64 positions" in capsys.readouterr().err
    # issue 65: a missing token file is named, with no advice to delete its folder; an --out in
    # a folder that does not exist is refused before the work, not after it
    missing = tmp_path / "nowhere.bin"
    err = refused("--model", str(good), "--tokens", str(missing))
    assert f"--tokens {missing}: no such file" in err and "delete" not in err
    with pytest.raises(SystemExit):
        cli.main(
            [
                "influence",
                "--model",
                str(good),
                "--tokens",
                str(tokens),
                "--long-len",
                "24",
                "--short-len",
                "12",
                "--k",
                "3",
                "--out",
                str(tmp_path / "no" / "o.csv"),
            ]
        )
    assert f"its folder {tmp_path / 'no'} does not exist" in capsys.readouterr().err
    # issue 66: a --long-len whose one forward cannot fit the free memory, refused before the work
    # (it once built every leave-one-out mask at once, 9.3 GiB at 100,000, and died)
    from lengen.core import device

    monkeypatch.setattr(device, "free_bytes", lambda where: 8 * 2**30)  # any machine: 8 GiB free
    config.max_position_embeddings = 200_000
    LlamaForCausalLM(config).save_pretrained(tmp_path / "long")
    np.random.default_rng(0).integers(0, 50, 200_000).astype(np.uint16).tofile(tokens)
    with pytest.raises(SystemExit):
        cli.main(
            [
                "influence",
                "--model",
                str(tmp_path / "long"),
                "--tokens",
                str(tokens),
                "--long-len",
                "100000",
                "--short-len",
                "12",
                "--masks-per-pass",
                "1",
                "--n-examples",
                "1",
                "--out",
                str(tmp_path / "o.csv"),
            ]
        )
    [line] = capsys.readouterr().err.strip().splitlines()[-1:]
    assert "--long-len 100000: one forward of 1 masked copies needs at least 46.6 GiB" in line
    assert "8.0 GiB is free on cpu: lower --long-len or --masks-per-pass" in line


def offline_env(tmp_path: Path) -> dict:
    """An environment with no apt-get or dpkg-deb on PATH and every network connection refused
    (a sitecustomize that replaces socket's connect), the hub offline."""
    import os
    import sys

    blocker = tmp_path / "offline"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import socket\n"
        "def _refuse(*args, **kwargs):\n"
        "    raise OSError('network disabled by the test')\n"
        "socket.socket.connect = _refuse\n"
        "socket.create_connection = _refuse\n"
    )
    return {
        **os.environ,
        "PATH": str(Path(sys.executable).parent),  # no apt-get, no dpkg-deb
        "PYTHONPATH": os.pathsep.join([str(blocker), *sys.path]),
        "HF_HUB_OFFLINE": "1",
    }


def build_offline(nl: dict, out: Path, env: dict) -> dict:
    """The corpus and token files of a natural_language section, built by the project's own
    modules under `env`; returns the corpus's sources.json."""
    import json
    import subprocess
    import sys

    corpus = subprocess.run(
        [
            sys.executable,
            "-m",
            "lengen.data.corpus",
            "--corpus",
            json.dumps(nl["corpus"]),
            "--seed",
            "0",
            "--out",
            str(out / "corpus"),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert corpus.returncode == 0, corpus.stderr[-2000:]
    tokens = subprocess.run(
        [
            sys.executable,
            "-m",
            "lengen.data.tokens",
            "--tokenizer",
            json.dumps(nl["tokenizer"]),
            "--source",
            nl["corpus"]["source"],
            "--corpus-dir",
            str(out / "corpus"),
            "--max-tokens",
            json.dumps(nl["max_tokens"]),
            "--out",
            str(out / "tokens"),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert tokens.returncode == 0, tokens.stderr[-2000:]
    return json.loads((out / "corpus" / "sources.json").read_text())


def test_every_docstrings_distribution_is_pinned_exactly():
    """A tier whose corpus is docstrings reads only distributions that constraints.txt pins with
    `==` (so the text is the same on every machine that installs the project as the README says),
    each installed here at that version."""
    from importlib import metadata

    from lengen.config.config import read_tier

    from .test_workflow import constraints

    pins = constraints()
    tiers = 0
    for path in sorted((ROOT / "config").glob("*.yaml")):
        corpus = read_tier(path).get("natural_language", {}).get("corpus", {})
        if corpus.get("source") != "docstrings":
            continue
        tiers += 1
        for pkg in corpus["packages"]:
            name = pkg["name"].lower()
            assert name in pins, f"{path.name}: {name} is not pinned in constraints.txt"
            assert metadata.version(name).split("+")[0] == pins[name], name
    assert tiers >= 2  # the smoke and default tiers


def test_the_smoke_language_data_need_no_apt_and_no_network(tmp_path, smoke_config):
    """The smoke tier's corpus (the docstrings of an installed, pinned distribution) and its
    tokenizer (a BPE trained on that corpus) build with no apt-get on PATH and every network
    connection refused (issue 48: every tier called apt-get and pip download while it ran);
    the corpus is the same on a second build (seeded, from pinned files)."""
    import json
    import subprocess
    import sys

    env = offline_env(tmp_path)
    nl = smoke_config["natural_language"]
    assert nl["corpus"]["source"] == "docstrings" and nl["tokenizer"]["source"] == "corpus_bpe"
    first = build_offline(nl, tmp_path / "a", env)
    second = build_offline(nl, tmp_path / "b", env)
    assert first == second and first["distributions"][0]["distribution"] == "datasets"
    for name in ("train.bin", "validation.bin"):
        assert (tmp_path / "a" / "tokens" / name).read_bytes() == (
            tmp_path / "b" / "tokens" / name
        ).read_bytes()
    # the Debian source, where apt-get is missing, says so and what to use instead
    debian = subprocess.run(
        [
            sys.executable,
            "-m",
            "lengen.data.corpus",
            "--corpus",
            json.dumps(
                {
                    "source": "debian",
                    "packages": [{"name": "x", "glob": "*", "format": "text"}],
                    "validation_fraction": 0.1,
                    "max_doc_chars": 100,
                    "docs_per_shard": 10,
                }
            ),
            "--seed",
            "0",
            "--out",
            str(tmp_path / "debian"),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert debian.returncode != 0
    assert "needs Debian's apt-get and dpkg-deb" in debian.stderr and "docstrings" in debian.stderr


@pytest.mark.slow  # ~2 min: the docstrings of 13 distributions, a 4k BPE trained on 26 M characters
def test_the_default_language_data_need_no_apt_and_no_network(tmp_path):
    """The default tier's corpus and tokenizer build as the smoke tier's do, with no apt-get and
    no network (issue 48: its corpus was Debian's manuals, fetched by apt-get while it ran), from
    every distribution it lists, into enough tokens for Table 1's held-out chunks."""
    import json

    from lengen.config.config import read_tier

    nl = read_tier(ROOT / "config" / "config.yaml")["natural_language"]
    assert nl["corpus"]["source"] == "docstrings" and nl["tokenizer"]["source"] == "corpus_bpe"
    manifest = build_offline(nl, tmp_path, offline_env(tmp_path))
    assert [d["distribution"] for d in manifest["distributions"]] == [
        p["name"] for p in nl["corpus"]["packages"]
    ]
    meta = json.loads((tmp_path / "tokens" / "meta.json").read_text())
    chunks = nl["eval"]["n_chunks"] * (nl["long_context"] + 1) * 2  # Table 1's, then the loss's
    assert meta["tokens"]["validation"] > chunks and meta["tokens"]["train"] > 5_000_000


def test_a_distributions_licence_is_read_from_whichever_field_states_it():
    """sources.json's licence: the SPDX expression, else the License classifiers, else the first
    line of `License` (matplotlib and mlflow put the whole licence text there)."""
    from email.message import Message

    def meta(**fields):
        m = Message()
        for key, values in fields.items():
            for value in values if isinstance(values, list) else [values]:
                m[key.replace("_", "-")] = value
        return m

    assert corpus.licence(meta(License_Expression="MIT", License="ignored")) == "MIT"
    classified = meta(
        Classifier=["Programming Language :: Python", "License :: OSI Approved :: BSD License"],
        License="Full text\nof it",
    )
    assert corpus.licence(classified) == "OSI Approved :: BSD License"
    assert corpus.licence(meta(License="Apache 2.0\n\nTerms...")) == "Apache 2.0"
    assert corpus.licence(meta()) == ""


def test_train_spec_sections_of_both_models(smoke_config):
    """App. F / Sec. 5.3: h_short trains at context L with PoSE from `pose_start` on, h_long at
    Lbar without; both models hold IDs up to Lbar (l_max = Lbar + 1); the scheme defaults to
    rope_pose; the section's ds_config, loss_chunk_tokens and zero_stage reach the runtime."""
    cfg = copy.deepcopy(smoke_config)
    nl = cfg["natural_language"]
    short, long = (natural_language.train_spec(cfg, w) for w in ("short", "long"))
    assert (short["task"]["context"], long["task"]["context"]) == (64, 128)
    for spec in (short, long):
        assert spec["task"]["l_max"] == spec["model"]["l_max"] == 129
        assert spec["model"]["position"] == "rope" and spec["model"]["n_layer"] == 1
        assert spec["task"]["train_tokens"].endswith("natural_language/tokens/train.bin")
        assert spec["experiment"] == "natural_language" and spec["seed"] == cfg["seed"]
        assert "loss_chunk_tokens" not in spec["runtime"] and "ds_config" not in spec["runtime"]
    assert (short["run_name"], long["run_name"]) == ("h_short", "h_long")
    assert (short["task"]["pose_start"], long["task"]["pose_start"]) == (3, None)
    assert (short["train"], long["train"]) == (nl["short"]["train"], nl["long"]["train"])
    del nl["scheme"]  # the default: the paper's RoPE with PoSE
    assert natural_language.train_spec(cfg, "short")["task"]["pose_start"] == 3
    assert natural_language.train_spec(cfg, "short")["model"]["position"] == "rope"
    nl["scheme"] = "alibi"
    assert natural_language.train_spec(cfg, "short")["task"]["pose_start"] is None
    nl |= {"loss_chunk_tokens": 256, "zero_stage": 2, "ds_config": "config/ds_config_lm.json"}
    runtime = natural_language.train_spec(cfg, "long")["runtime"]
    assert runtime["loss_chunk_tokens"] == 256 and runtime["zero_stage"] == 2
    assert runtime["ds_config"]["zero_optimization"]["overlap_comm"] is True


def test_config_checks_each_constraint_alone(smoke_config):
    """Sec. 5.3's constraints, each broken alone on the smoke section, give exactly its error
    (key and message); the smoke section itself passes. Language models take true IDs, with or
    without PoSE: no coupled scheme, no training shift."""
    from lengen.core.positions import SCHEME_TABLE

    def errors(**edits):
        section = edited(smoke_config["natural_language"], **edits)
        return natural_language.config_checks("nl", section)

    assert errors() == []
    assert errors(short_context=128) == [
        ("nl.short_context", "must be below long_context (L < Lbar)"),
        ("nl.influence.k", "must be below Lbar - L - 1 = -1"),
    ]
    divides = ("nl.eval.lengths", "must divide and end at long_context (128)")
    assert errors(eval__lengths=[64, 96]) == [divides]  # does not end at Lbar
    assert errors(eval__lengths=[48, 128]) == [divides]  # 48 does not divide 128
    assert errors(influence__k=63) == [("nl.influence.k", "must be below Lbar - L - 1 = 63")]
    assert errors(influence__k=62) == []
    pose = ("nl.short.pose_start", "must be below short.train.steps")
    assert errors(short__pose_start=4) == [pose]
    assert errors(short__pose_start=None) == []
    hub = ("nl.tokenizer.name", "required when source is hub")
    assert errors(tokenizer={"source": "hub"}) == [hub]
    c4 = ("nl.corpus.c4_dir", "required when source is c4_dir")
    assert errors(corpus={"source": "c4_dir"}) == [c4]
    assert errors(corpus={"source": "docstrings"}) == [
        (f"nl.corpus.{f}", "required for source docstrings")
        for f in ("packages", "validation_fraction", "max_doc_chars", "docs_per_shard")
    ]
    debian = errors(corpus__source="debian", corpus__packages=[{"name": "x", "glob": "*"}])
    assert debian == [("nl.corpus.packages.0.format", "required when source is debian")]
    supported = {n for n, s in SCHEME_TABLE.items() if natural_language.supports(s)}
    assert supported == {"rope_pose", "nope", "alibi"}  # not ppc (coupled), not absolute (shift)


def test_window_table_needs_a_target_beyond_the_window():
    """Chunks of window + 2 tokens have one target beyond the window (it is scored); chunks of
    window + 1 have none: a ValueError naming the chunk length and the window."""
    chunks = np.random.default_rng(0).integers(0, 50, (2, SHORT + 2))
    table = perplexity.window_table(LastToken(), chunks, SHORT, 4, progress=False)
    assert set(table.n_targets) == {1} and len(table) == 4
    with pytest.raises(
        ValueError,
        match=rf"^chunks of {SHORT + 1} tokens have no target beyond "
        rf"{SHORT}$",
    ):
        perplexity.window_table(LastToken(), chunks[:, :-1], SHORT, 4, progress=False)


def test_analyse_passes_its_memory_bound_to_every_forward(model, monkeypatch):
    """analyse's rows_per_pass (the CLI's memory budget) bounds every leave-one-out forward: the
    Lbar - L - 1 masked copies are made and run at most that many at a time (the three
    contexts' pass has 3 rows)."""
    seen = []
    original = influence.target_logprob

    def spy(model, x, keep, rows_per_pass=None):
        seen.append((keep.shape[0], rows_per_pass))
        return original(model, x, keep, rows_per_pass)

    monkeypatch.setattr(influence, "target_logprob", spy)
    examples = np.stack([_seq(3).numpy()])
    influence.analyse({"h_short": model}, examples, SHORT, k=2, rows_per_pass=4)
    loo, contexts_pass = seen[:-1], seen[-1]
    assert LONG - SHORT - 1 > 4 and [rows for rows, _ in loo] == [4, 4, 1]
    assert contexts_pass[0] == 3


def test_a_hugging_face_gpt2_scores_like_its_own_forward_and_non_causal_models_are_refused(
    tmp_path,
):
    """HFCausalLM on a GPT-2 (an *LMHeadModel with learned absolute positions, so its IDs must
    be 0..T-1 exactly): the fully kept row's log-probability is the model's own forward's.
    Directories that are not causal language models are one ValueError naming the directory and
    the architecture (or the model type): no config.json, a masked LM, an encoder-decoder
    whatever its architectures say; a BERT marked as a decoder passes the check."""
    import json

    from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(
        GPT2Config(vocab_size=50, n_positions=32, n_embd=16, n_layer=1, n_head=2)
    ).eval()
    gpt2.save_pretrained(tmp_path / "gpt2")
    hf = influence.HFCausalLM.from_pretrained(tmp_path / "gpt2")
    x = _seq(2)
    keep = torch.ones(1, LONG - 1, dtype=torch.bool)
    with torch.no_grad():
        logits = gpt2(x[None, :-1]).logits[0, -1]
    want = torch.log_softmax(logits, -1)[x[-1]]
    torch.testing.assert_close(influence.target_logprob(hf, x, keep)[0], want, atol=1e-5, rtol=1e-5)
    not_causal = re.escape(
        "is not a causal (next-token) language model; leave-one-out (Eq. 6) "
        "scores p(next token | context)"
    )
    with pytest.raises(
        ValueError,
        match=rf"^{tmp_path}: not a local transformers model "
        r"directory \(no config.json there\)$",
    ):
        influence.HFCausalLM.from_pretrained(tmp_path)
    BertForMaskedLM(
        BertConfig(
            vocab_size=50,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
        )
    ).save_pretrained(tmp_path / "bert")
    with pytest.raises(ValueError, match=rf"^{tmp_path / 'bert'}: BertForMaskedLM {not_causal}"):
        influence.HFCausalLM.from_pretrained(tmp_path / "bert")
    config = json.loads((tmp_path / "bert" / "config.json").read_text())
    (tmp_path / "bert" / "config.json").write_text(json.dumps({**config, "is_decoder": True}))
    assert isinstance(influence.HFCausalLM.from_pretrained(tmp_path / "bert"), influence.HFCausalLM)
    for name, archs in (("ed", ["GPT2LMHeadModel"]), ("ed_bare", None)):
        folder = tmp_path / name
        folder.mkdir()
        config = {"model_type": "gpt2", "is_encoder_decoder": True}
        (folder / "config.json").write_text(
            json.dumps(config | ({"architectures": archs} if archs else {}))
        )
        what = "GPT2LMHeadModel" if archs else "gpt2"
        with pytest.raises(ValueError, match=rf"^{folder}: {what} {not_causal}"):
            influence.HFCausalLM.from_pretrained(folder)


def test_leave_one_out_masks_are_made_a_pass_at_a_time(model):
    """The leave-one-out masks of one pass (contexts.loo_keep's rows) are the whole set's rows,
    and loo_logprob over passes of any size equals one forward over every mask."""
    from lengen.analysis.influence import loo_logprob, target_logprob

    whole = contexts.loo_keep(LONG, SHORT)
    n_far = LONG - SHORT - 1
    assert whole.shape == (n_far, LONG - 1)
    for start, stop in ((0, 3), (3, 7), (n_far - 2, n_far + 5)):
        np.testing.assert_array_equal(
            contexts.loo_keep(LONG, SHORT, start, stop), whole[start:stop]
        )
    x = _seq(1)
    want = target_logprob(model, x, torch.as_tensor(whole))
    for rows in (None, 1, 4, n_far):
        torch.testing.assert_close(loo_logprob(model, x, SHORT, rows), want)

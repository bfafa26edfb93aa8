"""The natural-language setup step (lengen.data.setup): fetched once where there is network, read
by the run without any download; cut downloads fetched again; a missing fetch named with the
command that fills it."""

from __future__ import annotations

import gzip
import json

import pytest

from lengen.config.config import load
from lengen.data import corpus, setup, tokens

from .conftest import ROOT


def fake_download(calls):
    def download(name, dest):
        calls.append(name)
        with gzip.open(dest, "wt") as f:
            f.write(json.dumps({"text": f"a document of {name}", "url": name}) + "\n")

    return download


def test_the_paper_tier_fetches_the_shards_its_tokens_need():
    paper = load(ROOT / "config" / "paper.yaml")
    shards = setup.c4_shards(paper["natural_language"])
    assert len(shards["train"]) == 199 and len(shards["validation"]) == 2  # 30 B tokens: 198 + 1
    assert shards["train"][0] == "c4-train.00000-of-01024.json.gz"
    assert setup.plan(load(ROOT / "config" / "smoke.yaml")) == []
    default = load(ROOT / "config" / "config.yaml")  # installs with the project (issue 48)
    assert setup.plan(default) == [] and setup.run_time_downloads(default) == []
    debian = {"natural_language": {"corpus": {"source": "debian"}, "tokenizer": {}}}
    assert any("apt-get download" in line for line in setup.run_time_downloads(debian))


def test_fetch_c4_resumes_and_refetches_a_cut_shard(tmp_path):
    calls = []
    shards = {
        "train": ["c4-train.00000-of-01024.json.gz", "c4-train.00001-of-01024.json.gz"],
        "validation": ["c4-validation.00000-of-00008.json.gz"],
    }
    assert setup.fetch_c4(tmp_path, shards, fake_download(calls)) == [
        *shards["train"],
        *shards["validation"],
    ]
    assert setup.fetch_c4(tmp_path, shards, fake_download(calls)) == []  # all there and whole
    cut = tmp_path / shards["train"][1]
    cut.write_bytes(cut.read_bytes()[:-8])  # an interrupted copy
    assert setup.fetch_c4(tmp_path, shards, fake_download(calls)) == [shards["train"][1]]
    docs = list(corpus.read_documents("c4_dir", "train", tmp_path))  # the run's own reader
    assert docs == [f"a document of {name}" for name in shards["train"]]

    def broken(name, dest):
        dest.write_text("<html>rate limited</html>")

    (tmp_path / shards["validation"][0]).unlink()
    with pytest.raises(OSError, match="not a whole gzip file; rerun"):
        setup.fetch_c4(tmp_path, shards, broken)
    assert not (tmp_path / shards["validation"][0]).exists()


def test_a_fetched_tokenizer_is_read_offline_and_a_missing_one_named(tmp_path, monkeypatch):
    texts = ["the quick brown fox jumps over the lazy dog"] * 50
    local = tmp_path / "tok"
    tokens.train_corpus_bpe(texts, 300).save_pretrained(str(local))  # as setup saves a hub one
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = {"source": "hub", "name": "nobody/not-on-this-machine", "dir": str(local)}
    tok = tokens.prepare_tokenizer(cfg, tmp_path / "out")
    assert tok.decode(tok("the lazy dog")["input_ids"]) == "the lazy dog"
    cfg["dir"] = str(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match=r"tokenizer.dir: .*lengen setup"):
        tokens.prepare_tokenizer(cfg, tmp_path / "out2")
    monkeypatch.setattr(tokens, "fetch_mistral_v1", lambda out: pytest.fail("downloaded"))
    with pytest.raises(FileNotFoundError, match="holds no tokenizer.model"):
        tokens.prepare_tokenizer({"source": "mistral_v1", "dir": str(tmp_path / "m")}, tmp_path)


def test_an_empty_c4_dir_names_the_setup_step(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"c4_dir: no c4-train.*lengen setup"):
        corpus.link_c4_dir(tmp_path, tmp_path / "out")


def test_the_cli_says_what_it_would_fetch(capsys):
    from lengen import cli

    cli.main(["setup", "--configfile", str(ROOT / "config" / "gpu.yaml"), "--dry-run"])
    out = capsys.readouterr().out
    assert "C4 train: 8 shards into data/c4" in out and "tokenizer mistral_v1 into" in out
    cli.main(["setup", "--configfile", str(ROOT / "config" / "smoke.yaml")])
    assert "nothing to fetch" in capsys.readouterr().out

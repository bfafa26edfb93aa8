"""The natural-language data a tier reads that must be downloaded: fetched once, before the run,
on a machine with network (a cluster's login node), so that no job downloads anything (compute
nodes often have no network, and every job would repeat it).

    lengen setup --configfile config/paper.yaml [--dry-run]

What it fetches follows the tier's `natural_language` section:
- `corpus.source: c4_dir`: C4 `en` shards (allenai/c4 on the Hugging Face hub) into
  `corpus.c4_dir`, as many as `max_tokens` needs (C4_TOKENS_PER_SHARD) plus one; a shard already
  there and whole (it decompresses) is kept, a cut one fetched again, each written under a
  temporary name and renamed, so an interrupted setup resumes;
- `tokenizer.dir` with `source: mistral_v1` (the mistral-common wheel's SentencePiece model,
  from PyPI) or `source: hub` (the named tokenizer's files): saved there; the tokenizer rule then
  reads that folder only.
The smoke and default tiers need none of it (their corpus and tokenizer install with the
project); a tier with nothing to fetch says so.

No workflow job imports this module: it is `lengen setup`, run once on a machine with network
before a tier whose data must be downloaded, so that no job downloads.
"""

from __future__ import annotations

import gzip
import math
import shutil
import zlib
from collections.abc import Callable
from pathlib import Path

from lengen.data import corpus
from lengen.data.tokens import FETCHED, fetch_mistral_v1

C4_REPO = "allenai/c4"
C4_TOTAL = {"train": 1024, "validation": 8}  # C4 en's shards per split
# tokens per shard, to size the download (Llama-2-like 32k tokenizers, C4 en: ~156 B tokens in
# 1,024 train shards; its validation split ~0.17 B in 8); one more shard is fetched as margin
C4_TOKENS_PER_SHARD = {"train": 152_000_000, "validation": 21_000_000}


def c4_shards(nl: dict) -> dict[str, list[str]]:
    """The C4 shard file names the tier's max_tokens needs, per split (the first ones)."""
    out = {}
    for split, total in C4_TOTAL.items():
        n = min(total, math.ceil(nl["max_tokens"][split] / C4_TOKENS_PER_SHARD[split]) + 1)
        out[split] = [corpus.shard_name(split, i, total) for i in range(n)]
    return out


def whole(path: Path) -> bool:
    """A gzip file that decompresses to its end (a download cut off does not)."""
    try:
        with gzip.open(path, "rb") as f:
            while f.read(1 << 24):
                pass
        return True
    except (OSError, EOFError, zlib.error):
        return False


def hub_download(name: str, dest: Path) -> None:
    """One C4 shard from the hub (en/<name>) to dest."""
    from huggingface_hub import hf_hub_download

    cached = hf_hub_download(C4_REPO, f"en/{name}", repo_type="dataset")
    shutil.copyfile(cached, dest)


def fetch_c4(
    c4_dir: Path, shards: dict[str, list[str]], download: Callable[[str, Path], None] = hub_download
) -> list[str]:
    """Every listed shard in c4_dir, whole; returns the names fetched now."""
    c4_dir.mkdir(parents=True, exist_ok=True)
    fetched = []
    for name in (n for names in shards.values() for n in names):
        path = c4_dir / name
        if path.exists() and whole(path):
            continue
        partial = path.with_name(path.name + ".part")
        download(name, partial)
        if not whole(partial):
            raise OSError(f"{partial}: the download of {name} is not a whole gzip file; rerun")
        partial.replace(path)
        fetched.append(name)
    return fetched


def fetch_tokenizer(tokenizer: dict, dest: Path) -> None:
    """The tokenizer's files in dest: mistral_v1's model (PyPI), or a hub tokenizer's."""
    dest.mkdir(parents=True, exist_ok=True)
    if tokenizer["source"] == "mistral_v1":
        fetch_mistral_v1(dest)
    elif tokenizer["source"] == "hub":
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(tokenizer["name"]).save_pretrained(str(dest))
    else:
        source = tokenizer["source"]
        raise ValueError(f"tokenizer source {source!r} is built by the run, not fetched")


def plan(cfg: dict) -> list[str]:
    """What setup would fetch for the config, one line each (empty: nothing)."""
    nl = cfg.get("natural_language")
    if not nl:
        return []
    lines = []
    if nl["corpus"]["source"] == "c4_dir":
        c4_dir = nl["corpus"]["c4_dir"]
        for split, names in c4_shards(nl).items():
            lines.append(f"C4 {split}: {len(names)} shards into {c4_dir}")
    tok = nl["tokenizer"]
    if tok.get("dir") and tok["source"] in FETCHED:
        what = " ".join(filter(None, (tok["source"], tok.get("name"))))
        lines.append(f"tokenizer {what} into {tok['dir']}")
    return lines


def run_time_downloads(cfg: dict) -> list[str]:
    """What the tier's run would still download itself (this step does not fetch it)."""
    nl = cfg.get("natural_language") or {}
    out = []
    if nl.get("corpus", {}).get("source") == "debian":
        out.append("corpus source debian: the run downloads Debian packages (apt-get download)")
    if nl.get("corpus", {}).get("source") == "c4_hub":
        out.append("corpus source c4_hub: the run streams allenai/c4 (use c4_dir to fetch once)")
    tok = nl.get("tokenizer", {})
    if tok.get("source") in FETCHED and not tok.get("dir"):
        out.append(f"tokenizer {tok['source']} without dir: the run downloads it")
    return out


def run(cfg: dict, dry_run: bool = False) -> list[str]:
    """`lengen setup`: say what the config needs fetched and fetch it (unless dry_run); the
    lines it printed."""
    out = [f"note: {line}" for line in run_time_downloads(cfg)]
    todo = plan(cfg)
    out += todo or [
        "nothing to fetch" + ("" if out else " (its corpus and tokenizer install with the project)")
    ]
    print("\n".join(out))
    if dry_run or not todo:
        return out
    nl = cfg["natural_language"]
    if nl["corpus"]["source"] == "c4_dir":
        new = fetch_c4(Path(nl["corpus"]["c4_dir"]), c4_shards(nl))
        out.append(f"C4: {len(new)} shards fetched, the rest already there")
        print(out[-1])
    tok = nl["tokenizer"]
    if tok.get("dir") and tok["source"] in FETCHED:
        fetch_tokenizer(tok, Path(tok["dir"]))
        out.append(f"tokenizer saved in {tok['dir']}")
        print(out[-1])
    return out

"""Tokenizer and token files for the natural-language experiment (Sec. 5.3, App. F).

The paper uses the Llama-2-7b tokenizer (32,000-token SentencePiece BPE with byte fallback).
Sources, chosen by `natural_language.tokenizer.source`:
- `hub`: any HF tokenizer by name (e.g. meta-llama/Llama-2-7b-hf; needs hub access);
- `mistral_v1` (offline, no hub; gpu.yaml): `tokenizer.model.v1` from the Apache-2.0
  `mistral-common` wheel on PyPI, a 32,000-token SentencePiece BPE with byte fallback, the same
  design as Llama-2's, loaded through HF transformers' LlamaTokenizer;
- `corpus_bpe` (DEPARTURE; the default tier's, 4,096 tokens): a byte-level BPE of `vocab_size`
  tokens trained on the training split with HF `tokenizers` (seconds). At a small model's width
  the 32k-way output head is most of the compute; a small vocabulary buys more tokens per second.
Either way the tokenizer is saved in HF format beside the tokens. Each split is tokenized once
(documents joined by EOS, as in OLMo's packed data) into a flat uint16 file read by np.memmap.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
from tqdm import tqdm

from lengen.core.cli import KnownError, command_parser, json_object, one_line_errors
from lengen.data import corpus

MISTRAL_WHEEL = "mistral-common==1.13.1"
MISTRAL_MEMBER = "mistral_common/data/tokenizer.model.v1"
MISTRAL_SHA256 = "dadfd56d766715c61d2ef780a525ab43b8e6da4de6865bda3d95fdef5e134055"
DTYPE = np.uint16  # every vocabulary here has < 65,536 tokens
FETCHED = ("mistral_v1", "hub")  # tokenizer sources whose files come from the network


def fetch_mistral_v1(out_dir: Path) -> None:
    """Download the mistral-common wheel from PyPI and extract its v1 SentencePiece model."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, MISTRAL_WHEEL],
            check=True,
        )
        wheel = next(Path(tmp).glob("mistral_common-*.whl"))
        data = zipfile.ZipFile(wheel).read(MISTRAL_MEMBER)
    digest = hashlib.sha256(data).hexdigest()
    if digest != MISTRAL_SHA256:
        raise ValueError(f"{MISTRAL_MEMBER}: sha256 {digest}, expected {MISTRAL_SHA256}")
    (out_dir / "tokenizer.model").write_bytes(data)


EOS = "</s>"  # the end-of-document token of every tokenizer trained here (Llama-2's name)


def train_corpus_bpe(texts, vocab_size: int):
    """A byte-level BPE (no unknown tokens) of vocab_size tokens trained on texts, with EOS as
    its one special token, as a transformers fast tokenizer. Deterministic for the same texts."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=EOS)


def fetched_dir(cfg: dict) -> Path | None:
    """The tokenizer's local folder (`tokenizer.dir`, filled by lengen setup), or
    None when the config names none; a named folder without the tokenizer is an error saying
    how to fill it."""
    if not cfg.get("dir") or cfg["source"] not in FETCHED:
        return None
    local = Path(cfg["dir"])
    marker = "tokenizer.model" if cfg["source"] == "mistral_v1" else "tokenizer_config.json"
    if not (local / marker).is_file():
        raise FileNotFoundError(
            f"natural_language.tokenizer.dir: {local} holds no {marker}; fetch it once where "
            "there is network: lengen setup --configfile <this tier's config>"
        )
    return local


def prepare_tokenizer(cfg: dict, out_dir: Path, train_texts=None):
    """The configured tokenizer, saved in HF format under out_dir (`corpus_bpe` is trained on
    train_texts, an iterable of the training split's documents)."""
    from transformers import AutoTokenizer, LlamaTokenizer

    local = fetched_dir(cfg)  # fetched once by lengen setup: no download here
    if cfg["source"] == "mistral_v1":
        if local:
            out_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(local / "tokenizer.model", out_dir / "tokenizer.model")
        else:
            fetch_mistral_v1(out_dir)
        tok = LlamaTokenizer.from_pretrained(str(out_dir))
    elif cfg["source"] == "corpus_bpe":
        if not cfg.get("vocab_size"):
            raise ValueError("natural_language.tokenizer.vocab_size: needed by source corpus_bpe")
        tok = train_corpus_bpe(train_texts, cfg["vocab_size"])
    else:
        tok = AutoTokenizer.from_pretrained(str(local) if local else cfg["name"])
    if len(tok) > np.iinfo(DTYPE).max:
        raise ValueError(f"vocabulary of {len(tok)} tokens does not fit {DTYPE.__name__}")
    tok.save_pretrained(str(out_dir))
    return tok


def tokenize_split(tok, texts, path: Path, max_tokens: int, batch: int = 512) -> int:
    """Write texts' token IDs, each document followed by EOS, to path; stop at max_tokens."""
    eos = tok.eos_token_id
    written = 0
    with open(path, "wb") as f, tqdm(total=max_tokens, desc=path.stem, mininterval=5) as bar:
        docs = []
        for text in texts:
            docs.append(text)
            if len(docs) < batch:
                continue
            written += _write(tok, docs, eos, f, max_tokens - written)
            bar.update(written - bar.n)
            docs = []
            if written >= max_tokens:
                return written
        if docs:
            written += _write(tok, docs, eos, f, max_tokens - written)
    return written


def _write(tok, docs: list[str], eos: int, f, budget: int) -> int:
    """Tokenize a batch of documents and append at most budget tokens to f."""
    ids = tok(docs, add_special_tokens=False)["input_ids"]
    flat = np.fromiter((t for doc in ids for t in (*doc, eos)), dtype=DTYPE)[:budget]
    flat.tofile(f)
    return len(flat)


class TokenFileError(KnownError, ValueError):
    """A token file that does not match what the tokens rule wrote (meta.json)."""


def load_tokens(path: str | Path) -> np.ndarray:
    """A token file as a read-only memory map, checked against meta.json beside it (the count the
    tokens rule wrote): a truncated or odd-sized file fails here, naming the file, and, for the
    pipeline's own token files (a meta.json beside them), the rule that remakes them. Nothing is
    ever advised deleted: a user's file (`lengen influence --tokens`) may sit anywhere."""
    path = Path(path)
    meta_path = path.parent / "meta.json"
    fix = (
        "remake it: snakemake --forcerun natural_language_tokens"
        if meta_path.exists()
        else f"a token file holds {DTYPE.__name__} token ids, as lengen.data.tokens writes them"
    )
    if not path.is_file():
        raise TokenFileError(f"{path}: no such file")
    size = path.stat().st_size
    itemsize = np.dtype(DTYPE).itemsize
    if size % itemsize:
        raise TokenFileError(
            f"{path}: {size} bytes is not a whole number of {DTYPE.__name__} "
            f"tokens: not a whole token file ({fix})"
        )
    if meta_path.exists():
        expected = json.loads(meta_path.read_text()).get("tokens", {}).get(path.stem)
        if expected is not None and size // itemsize != expected:
            raise TokenFileError(
                f"{path}: {size // itemsize} tokens, but {meta_path} records {expected} ({fix})"
            )
    return np.memmap(path, dtype=DTYPE, mode="r")


def consecutive_chunks(tokens: np.ndarray, size: int, n: int, offset: int = 0) -> np.ndarray:
    """n consecutive rows of `size` tokens starting at token `offset`, as int64 (held-out text)."""
    need = offset + n * size
    if len(tokens) < need:
        raise ValueError(f"held-out split has {len(tokens)} tokens, need {need}")
    return np.asarray(tokens[offset:need], dtype=np.int64).reshape(n, size)


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: tokenizer + train.bin + validation.bin + meta.json under --out."""
    parser = command_parser(__spec__, __doc__)
    parser.add_argument(
        "--tokenizer", required=True, type=json_object, help="JSON of natural_language.tokenizer"
    )
    parser.add_argument("--source", required=True, help="corpus source (debian|c4_dir|c4_hub)")
    parser.add_argument("--corpus-dir", type=Path, required=True)
    parser.add_argument(
        "--max-tokens", required=True, type=json_object, help='JSON {"train": N, "validation": M}'
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    tok_cfg = args.tokenizer
    train_texts = corpus.read_documents(args.source, "train", args.corpus_dir)
    tok = prepare_tokenizer(tok_cfg, args.out / "tokenizer", train_texts)
    budget = args.max_tokens
    counts = {}
    for split in corpus.SPLITS:
        texts = corpus.read_documents(args.source, split, args.corpus_dir)
        counts[split] = tokenize_split(tok, texts, args.out / f"{split}.bin", budget[split])
    meta = {
        "vocab_size": len(tok),
        "eos_token_id": tok.eos_token_id,
        "tokens": counts,
        "dtype": DTYPE.__name__,
    }
    (args.out / "meta.json").write_text(json.dumps(meta, indent=2))
    print(json.dumps(meta))


if __name__ == "__main__":
    main()

"""The text corpus of Sec. 5.3 (C4, Raffel et al. 2019) in C4's own file format, and one loader.

C4 `en` is JSON lines, gzipped, in shards named `c4-train.00000-of-01024.json.gz` and
`c4-validation.00000-of-00008.json.gz`, each line {"text", "timestamp", "url"}. Four sources:
- `c4_dir`: a local directory of such shards (real C4, downloaded beforehand);
- `c4_hub`: `allenai/c4` (en) streamed through HF `datasets` (needs hub access);
- `debian`: shards of the same names and fields built from free English text in Debian packages
  (`apt-get download` + `dpkg-deb -x`, no root; needs Debian's apt and the network), see
  `build_from_debian`;
- `docstrings`: the same, from the docstrings of installed Python distributions that
  pyproject.toml pins exactly (English reference documentation, like the Debian packages'; on
  any OS, with no network: they install with the project), see `build_from_docstrings`.
Every source is read by `read_documents`, so the rest of the pipeline cannot tell them apart.
"""

from __future__ import annotations

import ast
import datetime as dt
import fnmatch
import gzip
import hashlib
import json
import random
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

from lengen.core.cli import command_parser, json_object, one_line_errors

SPLITS = ("train", "validation")
FORMATS = ("html", "text", "fortune")


def shard_name(split: str, index: int, total: int) -> str:
    """C4's shard file name, e.g. c4-train.00000-of-01024.json.gz."""
    return f"c4-{split}.{index:05d}-of-{total:05d}.json.gz"


class _TextOfHTML(HTMLParser):
    """Collects visible text, paragraph by paragraph, skipping script/style/nav blocks."""

    BLOCK = {"p", "div", "li", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "tr", "br"}
    SKIP = {"script", "style", "head", "nav", "title"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skipping += 1
        if tag in self.BLOCK:
            self.parts.append("\n\n")

    def handle_endtag(self, tag):
        if tag in self.SKIP and self.skipping:
            self.skipping -= 1
        if tag in self.BLOCK:
            self.parts.append("\n\n")

    def handle_data(self, data):
        if not self.skipping:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """Visible text of an HTML page, blank lines between blocks."""
    parser = _TextOfHTML()
    parser.feed(html)
    return "".join(parser.parts)


def paragraphs(text: str, min_words: int = 3) -> list[str]:
    """Paragraphs (blank-line separated), whitespace collapsed, dropping ones under min_words."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        para = " ".join(block.split())
        if len(para.split()) >= min_words:
            out.append(para)
    return out


def to_documents(paras: list[str], max_chars: int) -> list[str]:
    """Group consecutive paragraphs into documents of at most ~max_chars (C4 pages: ~2 kB)."""
    docs, current = [], []
    for para in paras:
        if current and sum(map(len, current)) + len(para) > max_chars:
            docs.append("\n".join(current))
            current = []
        current.append(para)
    if current:
        docs.append("\n".join(current))
    return docs


def read_file_text(path: Path) -> str:
    """A file's text, gunzipped if it ends in .gz; undecodable bytes replaced."""
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return raw.decode("utf-8", errors="replace")


def file_documents(path: Path, fmt: str, max_chars: int) -> list[str]:
    """The documents of one extracted file: an HTML page, a text file, or a fortune file."""
    text = read_file_text(path)
    if fmt == "html":
        return to_documents(paragraphs(html_to_text(text)), max_chars)
    if fmt == "fortune":  # one fortune per document, fortunes separated by lines of '%'
        return [" ".join(f.split()) for f in re.split(r"\n%\n", text) if len(f.split()) >= 3]
    return to_documents(paragraphs(text), max_chars)


def fetch_package(name: str, workdir: Path) -> tuple[Path, str]:
    """apt-get download one package into workdir and unpack it there; (root, version). Without
    Debian's apt (macOS, RHEL) or the network, an error says so and what to use instead (it was
    a raw CalledProcessError with apt's message swallowed)."""
    missing = [tool for tool in ("apt-get", "dpkg-deb") if shutil.which(tool) is None]
    if missing:
        raise FileNotFoundError(
            f"natural_language.corpus source debian needs Debian's {' and '.join(missing)} (not "
            "on PATH here); on another system set source: docstrings (offline text from the "
            "installed Python packages, config/README.md) or c4_dir (local C4 shards)"
        )
    done = subprocess.run(
        ["apt-get", "download", name], cwd=workdir, capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(
            f"apt-get download {name} failed ({done.stderr.strip()[-300:]}); it needs the "
            "network and the package in apt's index (apt-get update); offline, set source: "
            "docstrings or c4_dir"
        )
    deb = sorted(workdir.glob(f"{name}_*.deb"))[-1]
    version = deb.name.split("_")[1]
    root = workdir / name
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root, version


def is_validation(url: str, fraction: float, seed: int) -> bool:
    """Deterministic held-out assignment of a document by a hash of (seed, url)."""
    digest = hashlib.sha256(f"{seed}:{url}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def shuffled(rows: list, seed: int, split: str) -> list:
    """rows in a random order drawn from (seed, split): deterministic, independent per split."""
    rng = random.Random(f"{seed}:{split}")
    return rng.sample(rows, len(rows))


def write_shards(records: dict[str, list[dict]], out: Path, docs_per_shard: int) -> dict:
    """Write each split's records as gzipped JSON-lines shards; return {split: n_shards}."""
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split, rows in records.items():
        total = max(1, -(-len(rows) // docs_per_shard))
        for i in range(total):
            chunk = rows[i * docs_per_shard : (i + 1) * docs_per_shard]
            with gzip.open(out / shard_name(split, i, total), "wt", encoding="utf-8") as f:
                for row in chunk:
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
        counts[split] = total
    return counts


def build_from_debian(cfg: dict, out: Path, seed: int) -> dict:
    """C4-format shards from the config's Debian packages; returns the sources manifest."""
    records: dict[str, list[dict]] = {s: [] for s in SPLITS}
    sources = []
    with tempfile.TemporaryDirectory() as tmp:
        for pkg in cfg["packages"]:
            root, version = fetch_package(pkg["name"], Path(tmp))
            files = sorted(p for p in root.glob(pkg["glob"]) if p.is_file())
            if not files:
                raise FileNotFoundError(f"package {pkg['name']}: no file matches {pkg['glob']!r}")
            n_docs = n_chars = 0
            for path in files:
                rel = path.relative_to(root)
                stamp = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC)
                for i, text in enumerate(file_documents(path, pkg["format"], cfg["max_doc_chars"])):
                    url = f"deb://{pkg['name']}/{version}/{rel}#{i}"
                    split = (
                        "validation"
                        if is_validation(url, cfg["validation_fraction"], seed)
                        else "train"
                    )
                    row = {
                        "text": text,
                        "timestamp": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        "url": url,
                    }
                    records[split].append(row)
                    n_docs, n_chars = n_docs + 1, n_chars + len(text)
            licence = root / "usr" / "share" / "doc" / pkg["name"] / "copyright"
            sources.append(
                {
                    "package": pkg["name"],
                    "version": version,
                    "files": len(files),
                    "documents": n_docs,
                    "characters": n_chars,
                    "licence_file": f"/usr/share/doc/{pkg['name']}/copyright",
                    "licence_head": licence.read_text(errors="replace")[:400]
                    if licence.exists()
                    else "",
                }
            )
    # C4's shards hold web pages in no particular order; package order would make the first
    # held-out chunks (Table 1, leave-one-out) all one package: shuffle each split (seeded)
    for split, rows in records.items():
        records[split] = shuffled(rows, seed, split)
    shards = write_shards(records, out, cfg["docs_per_shard"])
    manifest = {"source": "debian", "shards": shards, "packages": sources}
    (out / "sources.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def docstrings(path: Path) -> list[str]:
    """A Python file's docstrings (module, classes, functions) in source order; [] for a file
    that does not parse (a template, another Python's syntax)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return []
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    found = [
        (getattr(n, "lineno", 0), ast.get_docstring(n))
        for n in ast.walk(tree)
        if isinstance(n, kinds)
    ]
    return [text for _, text in sorted(found, key=lambda f: f[0]) if text]


def licence(meta) -> str:
    """A distribution's licence as its metadata states it: the SPDX `License-Expression`, else
    its `License ::` classifiers, else the first line of its `License` field (some hold the whole
    licence text there)."""
    classifiers = [
        c.split(" :: ", 1)[1]
        for c in meta.get_all("Classifier") or []
        if c.startswith("License ::")
    ]
    text = (meta.get("License") or "").strip().splitlines()
    found = meta.get("License-Expression") or "; ".join(classifiers) or (text[0] if text else "")
    return found[:200]


DOCSTRING_STAMP = "2000-01-01T00:00:00Z"  # C4's timestamp field: fixed (install times vary)


def build_from_docstrings(cfg: dict, out: Path, seed: int) -> dict:
    """C4-format shards from the docstrings of the config's installed Python distributions
    (each file's docstrings, paragraph by paragraph, grouped into documents of max_doc_chars);
    returns the sources manifest with each distribution's version. Nothing is downloaded."""
    from importlib import metadata

    records: dict[str, list[dict]] = {s: [] for s in SPLITS}
    sources = []
    for pkg in cfg["packages"]:
        name = pkg["name"]
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            raise FileNotFoundError(
                f"natural_language.corpus: Python distribution {name!r} is not installed; "
                f"pip install it (or the project: pip install -e .)"
            ) from None
        pattern = pkg.get("glob", "*.py")
        files = sorted(
            (
                f
                for f in metadata.files(name) or []
                if f.suffix == ".py" and fnmatch.fnmatch(str(f), pattern)
            ),
            key=str,
        )
        n_docs = n_chars = 0
        for f in files:
            text = "\n\n".join(docstrings(Path(f.locate())))
            for i, doc in enumerate(to_documents(paragraphs(text), cfg["max_doc_chars"])):
                url = f"py://{name}/{version}/{f}#{i}"
                held_out = is_validation(url, cfg["validation_fraction"], seed)
                split = "validation" if held_out else "train"
                records[split].append({"text": doc, "timestamp": DOCSTRING_STAMP, "url": url})
                n_docs, n_chars = n_docs + 1, n_chars + len(doc)
        if not n_docs:
            raise FileNotFoundError(f"distribution {name}: no docstrings in its {pattern!r} files")
        sources.append(
            {
                "distribution": name,
                "version": version,
                "files": len(files),
                "documents": n_docs,
                "characters": n_chars,
                "licence": licence(metadata.metadata(name)),
            }
        )
    for split, rows in records.items():  # as build_from_debian: no distribution's block first
        records[split] = shuffled(rows, seed, split)
    shards = write_shards(records, out, cfg["docs_per_shard"])
    manifest = {"source": "docstrings", "shards": shards, "distributions": sources}
    (out / "sources.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def read_documents(source: str, split: str, data_dir: Path | None = None) -> Iterator[str]:
    """Texts of one split, from C4-format shards in data_dir or streamed from allenai/c4."""
    import datasets

    datasets.disable_progress_bars()
    if source == "c4_hub":
        stream = datasets.load_dataset("allenai/c4", "en", split=split, streaming=True)
        for row in stream:
            yield row["text"]
        return
    files = sorted(str(p) for p in Path(data_dir).glob(f"c4-{split}.*-of-*.json.gz"))
    if not files:
        raise FileNotFoundError(f"no c4-{split}.*.json.gz shards in {data_dir}")
    # one file at a time: the datasets cache stays small and the order is the shard order
    for file in files:
        table = datasets.load_dataset("json", data_files=file, split="train")
        yield from table["text"]


def link_c4_dir(c4_dir: Path, out: Path) -> dict:
    """Use a local directory of real C4 shards: symlink them into out (no copy)."""
    out.mkdir(parents=True, exist_ok=True)
    shards = {}
    for split in SPLITS:
        files = sorted(c4_dir.glob(f"c4-{split}.*-of-*.json.gz"))
        if not files:
            raise FileNotFoundError(
                f"natural_language.corpus.c4_dir: no c4-{split}.*.json.gz in {c4_dir}; fetch "
                "the shards once where there is network: lengen setup "
                "--configfile <this tier's config> (or point c4_dir at your copy of C4 en)"
            )
        for f in files:
            target = out / f.name
            if target.exists() or target.is_symlink():
                target.unlink()
            target.symlink_to(f.resolve())
        shards[split] = len(files)
    manifest = {"source": "c4_dir", "c4_dir": str(c4_dir), "shards": shards}
    (out / "sources.json").write_text(json.dumps(manifest, indent=2))
    return manifest


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """CLI: python -m lengen.data.corpus --corpus JSON --seed S --out DIR (writes
    DIR/sources.json)."""
    parser = command_parser(__spec__, __doc__)
    parser.add_argument(
        "--corpus", required=True, type=json_object, help="JSON of natural_language.corpus"
    )
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    cfg = args.corpus
    if args.out.exists():  # a corpus this tool wrote (sources.json), or nothing: never else
        if any(args.out.iterdir()) and not (args.out / "sources.json").exists():
            parser.error(
                f"--out {args.out}: a folder this tool did not write (no sources.json); "
                "it is replaced whole, so name a new or empty one"
            )
        shutil.rmtree(args.out)
    if cfg["source"] == "debian":
        manifest = build_from_debian(cfg, args.out, args.seed)
    elif cfg["source"] == "docstrings":
        manifest = build_from_docstrings(cfg, args.out, args.seed)
    elif cfg["source"] == "c4_dir":
        manifest = link_c4_dir(Path(cfg["c4_dir"]), args.out)
    else:  # c4_hub: nothing to build; the tokenizer rule streams from the hub
        args.out.mkdir(parents=True)
        manifest = {"source": "c4_hub", "dataset": "allenai/c4", "config": "en"}
        (args.out / "sources.json").write_text(json.dumps(manifest, indent=2))
    print(json.dumps({k: v for k, v in manifest.items() if k not in ("packages", "distributions")}))


if __name__ == "__main__":
    main()

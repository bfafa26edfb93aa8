"""The `lengen` command: print a task's examples exactly as the model is fed them at test time
(`lengen sample <task>`), find Eq. (6)'s leave-one-out influential tokens with local Hugging Face
causal LMs (`lengen influence`), and fetch once what a tier's language models read from the
network (`lengen setup`). The pipeline itself runs through Snakemake (README).

No workflow job imports this module: it is pyproject's [project.scripts] entry, run by hand
(its --help shows the paragraph above alone).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

from lengen import tasks
from lengen.core.cli import HelpDefaults, first_paragraph, one_line_errors
from lengen.data import setup as data_setup
from lengen.tasks.base import nonnegative_int, positive_int

CHUNK = 4096  # examples drawn, then printed, at a time: memory stays the same for any --n


def _stream(args: argparse.Namespace):
    """The sampler's records, CHUNK examples at a time: up to CHUNK examples, the seed's one
    draw, as always; beyond, the seed's draw of CHUNK, then each next CHUNK from the seed's next
    stream ([seed, i])."""
    for i, start in enumerate(range(0, args.n, CHUNK)):
        chunk = {"n": min(CHUNK, args.n - start), "seed": args.seed if i == 0 else [args.seed, i]}
        yield from args.fn(argparse.Namespace(**{**vars(args), **chunk}))


def _common(p: argparse.ArgumentParser) -> None:
    """Options every sampler takes."""
    p.add_argument(
        "--n",
        type=positive_int,
        default=1,
        help=f"number of examples, printed {CHUNK:,} at a time (beyond the first "
        f"{CHUNK:,}, drawn from the seed's next streams)",
    )
    p.add_argument(
        "--seed",
        type=nonnegative_int,
        default=0,
        help="the draw's seed: the same seed, the same examples",
    )


def _unreadable(path: Path) -> str | None:
    """Why a local model directory's files cannot be read (its config.json not JSON, a weights
    file cut), naming the file; None when they can."""
    try:
        json.loads((path / "config.json").read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        return f"{path / 'config.json'}: not readable JSON ({err})"
    from safetensors import safe_open

    for weights in sorted(path.glob("*.safetensors")):
        try:
            with safe_open(str(weights), "pt") as f:
                f.keys()
        except Exception as err:  # safetensors raises its own error type for a cut header
            return f"{weights}: not a readable safetensors file ({err})"
    return None


def _load_model(args: argparse.Namespace, item: str):
    """(name, HFCausalLM) of one --model [NAME=]DIR; a parser error naming the file that
    cannot be read, or the directory that holds no causal LM."""
    from lengen.analysis.influence import HFCausalLM

    name, _, path = item.rpartition("=")
    if (Path(path) / "config.json").is_file() and (why := _unreadable(Path(path))):
        args.parser.error(f"--model {why}")
    try:
        model = HFCausalLM.from_pretrained(path)
    except ValueError as err:
        args.parser.error(f"--model {err}")
    except (OSError, RuntimeError) as err:
        args.parser.error(f"--model {path}: its weights cannot be read ({err})")
    return name or Path(path).name, model


def _text(args: argparse.Namespace) -> str:
    """--text's contents; a parser error when missing, empty or not UTF-8."""
    try:
        text = args.text.read_text(encoding="utf-8") if args.text.is_file() else ""
    except UnicodeDecodeError as err:
        args.parser.error(
            f"--text {args.text}: not UTF-8 text ({err}); convert it first, e.g. "
            f"iconv -f latin1 -t utf-8"
        )
    if not text.strip():
        args.parser.error(f"--text {args.text}: missing or empty; give a file of text")
    return text


def _check_fits(args: argparse.Namespace, models: dict, tokens: np.ndarray) -> None:
    """Refuse token ids beyond a model's vocabulary and a --long-len beyond its positions."""
    source = f"--tokens {args.tokens}" if args.tokens else f"--text {args.text}"
    for name, model in models.items():
        config = model.hf.config
        if tokens.size and int(tokens.max()) >= config.vocab_size:
            args.parser.error(
                f"{source}: token id {int(tokens.max())} is beyond {name}'s "
                f"vocabulary of {config.vocab_size}"
            )
        positions = getattr(config, "max_position_embeddings", None)
        if positions and args.long_len > positions:
            args.parser.error(
                f"--long-len {args.long_len} is beyond {name}'s "
                f"{positions} positions (max_position_embeddings)"
            )


def _check_memory(args: argparse.Namespace, models: dict) -> None:
    """Refuse, before any work, a --long-len whose one forward (--masks-per-pass masked copies,
    each with its (T x T) attention mask) cannot fit the memory free where the models are."""
    from lengen.analysis.influence import pass_bytes
    from lengen.core.device import free_bytes

    n_far = args.long_len - args.short_len - 1
    rows = min(args.masks_per_pass or n_far, n_far)
    model = next(iter(models.values()))
    param = next(model.parameters())
    need = pass_bytes(args.long_len, rows, param.element_size())
    free = free_bytes(str(param.device))
    if free is not None and need > free:
        args.parser.error(
            f"--long-len {args.long_len}: one forward of {rows} masked copies needs at least "
            f"{need / 2**30:.1f} GiB (their {args.long_len - 1} x {args.long_len - 1} attention "
            f"masks), {free / 2**30:.1f} GiB is free on {param.device}: lower --long-len or "
            "--masks-per-pass"
        )


def _influence(args: argparse.Namespace) -> None:
    """Eq. (6) leave-one-out on local Hugging Face causal LMs, written as the pipeline's table."""
    import torch

    from lengen.analysis.influence import analyse
    from lengen.data.tokens import TokenFileError, consecutive_chunks, load_tokens

    if args.short_len >= args.long_len - args.k:
        args.parser.error(f"--short-len must leave more than k = {args.k} far tokens")
    if not args.out.parent.is_dir():  # before the work, not after it (issue 65)
        args.parser.error(f"--out {args.out}: its folder {args.out.parent} does not exist")
    models = dict(_load_model(args, item) for item in args.model)
    if args.tokens:
        try:
            tokens = load_tokens(args.tokens)
        except TokenFileError as err:
            args.parser.error(f"--tokens {err}")
    else:
        from transformers import AutoTokenizer

        text = _text(args)
        tok = AutoTokenizer.from_pretrained(next(iter(args.model)).rpartition("=")[2])
        tokens = np.asarray(tok(text)["input_ids"])
    _check_fits(args, models, tokens)
    _check_memory(args, models)
    try:
        examples = consecutive_chunks(tokens, args.long_len, args.n_examples)
    except ValueError as err:
        args.parser.error(str(err))
    with torch.no_grad():
        table = analyse(models, examples, args.short_len, args.k, args.masks_per_pass)
    table.to_csv(args.out, index=False)
    print(f"{args.out}: {len(table)} rows ({len(examples)} sequences x {len(models)}^2 pairs)")


def _setup(args: argparse.Namespace) -> None:
    """`lengen setup`: the tier's config validated, then lengen.data.setup.run."""
    from lengen.config.config import load

    data_setup.run(load(args.configfile), args.dry_run)


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """Entry point of the `lengen` command."""
    parser = argparse.ArgumentParser(
        prog="lengen", description=first_paragraph(__doc__), formatter_class=HelpDefaults
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser(
        "influence",
        formatter_class=HelpDefaults,
        help="Eq. (6) leave-one-out influential tokens on local Hugging Face causal LMs",
        description="Leave-one-out (Sec. 5.3, Eq. 6) on local Hugging Face causal-LM directories "
        "(any model taking position_ids and a 4D attention mask: Llama, GPT-NeoX, ...): for each "
        "sequence of --long-len tokens, the k far tokens whose removal most lowers p(last "
        "token), then L_short, L_long and L_short,sparse per (scored, chosen-by) model pair.",
    )
    p.add_argument("--model", nargs="+", required=True, help="[NAME=]DIR of a local HF model")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--tokens", type=Path, help="uint16 token file (as the pipeline's)")
    source.add_argument("--text", type=Path, help="text, tokenized by the first model's tokenizer")
    p.add_argument(
        "--long-len", type=positive_int, default=128, help="Lbar, the long context, tokens"
    )
    p.add_argument(
        "--short-len", type=positive_int, default=64, help="L, the short context, tokens"
    )
    p.add_argument("--k", type=positive_int, default=5, help="influential tokens")
    p.add_argument(
        "--n-examples",
        type=positive_int,
        default=100,
        help="sequences of --long-len consecutive tokens scored",
    )
    p.add_argument(
        "--masks-per-pass",
        type=positive_int,
        default=None,
        metavar="N",
        help="memory bound: at most N masked copies of a sequence per forward (activations grow "
        "with N x --long-len tokens; default: all long-len - short-len - 1 masks in one forward; "
        "smaller is slower, with the same result up to float rounding)",
    )
    p.add_argument(
        "--out", type=Path, required=True, help="CSV table (influence_loo.csv's columns)"
    )
    p.set_defaults(fn=_influence, parser=p)
    setup = sub.add_parser(
        "setup",
        help="fetch once, where there is network, the C4 shards and tokenizer a tier reads",
        description=first_paragraph(data_setup.__doc__),
        formatter_class=HelpDefaults,
    )
    setup.add_argument("--configfile", required=True, type=Path, help="the tier's config")
    setup.add_argument("--dry-run", action="store_true", help="say what would be fetched")
    setup.set_defaults(fn=_setup, parser=setup)
    sample = sub.add_parser(
        "sample",
        help="print a task's examples as JSON lines, as the model is fed them at test time",
        formatter_class=HelpDefaults,
    )
    samplers = sample.add_subparsers(dest="task", required=True)
    for name, task in tasks.REGISTRY.items():  # every task that can print its examples
        if hasattr(task, "sample_records"):
            p = samplers.add_parser(
                name, help=task.__doc__.splitlines()[0], formatter_class=HelpDefaults
            )
            task.add_sample_arguments(p)
            _common(p)
            p.set_defaults(fn=task.sample_records, parser=p)
    args = parser.parse_args(argv)
    if args.cmd in ("influence", "setup"):
        args.fn(args)
        return
    try:
        for record in _stream(args):
            sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()
    except ValueError as err:  # a relation between arguments: argparse's usage + message, exit 2
        args.parser.error(str(err))
    except BrokenPipeError:  # `lengen sample ... | head -1`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        sys.exit(0)


if __name__ == "__main__":
    main()

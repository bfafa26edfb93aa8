"""Natural-language probes (issue: language models that use their long context, Table 1 and
Figs. 4/6 on a 2-core CPU).

A probe is one language model of the default tier's natural-language section (`which`: h_short,
context L with PoSE for its final steps, or h_long, context Lbar) with section keys overridden
(probes listed in `probes/language.yaml`): corpus packages, tokenizer, model, steps, batch, lr. The
corpus and token files are built by the project's own code (`lengen.data.corpus`,
`lengen.data.tokens`) once per (corpus, tokenizer, max_tokens) and shared by the probes that agree
on them (results/probes/language/data/<hash>). The model is trained by the project's trainer and
scored by the project's Table 1 code (`lengen.analysis.perplexity`: 256 held-out chunks of Lbar + 1
tokens, perplexity at eval lengths L and Lbar) and the leave-one-out code's context masks
(`lengen.analysis.influence`: mean L_short - L_long of the last token over 256 further held-out
sequences). Each finished probe appends one row to `probes/language_probes.csv` (committed). A
probe with `track_every: N` also scores its checkpoint every N steps the same way (training stops
there, is scored, and resumes from the checkpoint): rows (probe, step) of
`probes/language_trajectory.csv`, to see when copying forms and whether the long-context gain
moves with it.

Perplexities of different tokenizers are not comparable (different units); the relative drop
from L to Lbar and the loss differences are.

    python probes/language.py run NAME [NAME ...]   # build data if needed, train, score
    python probes/language.py list                 # names, and which have a row
    python probes/language.py figure               # relative drop vs tokens seen

Run two at a time, one thread each (platform notes), in the background:

    OMP_NUM_THREADS=1 nohup python probes/language.py run NAME > results/probes/NAME.log 2>&1 &
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sparse_parity import ROOT, append_row, load_probe, probe_cli

from lengen.analysis.copying import head_scores, repeat_copy_gain
from lengen.analysis.influence import target_logprob
from lengen.analysis.perplexity import chunk_nll, split_windows, window_nll
from lengen.core import provenance, tracking
from lengen.core.contexts import context_keeps
from lengen.data import corpus, tokens
from lengen.model.modelfile import model_from_saved, read_model_file
from lengen.tasks import natural_language, parse_spec
from lengen.train.train import build_model, train

PROBES = ROOT / "probes" / "language.yaml"
TABLE = ROOT / "probes" / "language_probes.csv"
TRAJECTORY = ROOT / "probes" / "language_trajectory.csv"  # probes with `track_every`
N_CHUNKS = 256  # Table 1's held-out chunks (the default tier's eval.n_chunks)
N_LOSS = 256  # sequences for mean L_short - L_long, after the chunks (as the influence rule)


def probe_config(name: str) -> tuple[dict, dict]:
    """(validated config with the probe's overrides, the probe's entry) for a probe name."""
    section = "natural_language"
    return load_probe(PROBES, name, "language", lambda e: section, lambda e: e.get(section, {}))


def data_dir(cfg: dict) -> Path:
    """Corpus + tokens of this config, built once per (corpus, tokenizer, max_tokens, seed)."""
    nl = cfg["natural_language"]
    key = {k: nl[k] for k in ("corpus", "tokenizer", "max_tokens")} | {"seed": cfg["seed"]}
    key["documents"] = "shuffled"  # since 2026-11-23 (before: package order, see the README)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    out = ROOT / "results" / "probes" / "language" / "data" / digest
    out.mkdir(parents=True, exist_ok=True)
    with open(out.with_suffix(".lock"), "w") as lock:  # two probes may need the same data
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "tokens" / "meta.json").exists():
            _build(nl, cfg["seed"], out)
            (out / "key.json").write_text(json.dumps(key, indent=2))
    return out


def _build(nl: dict, seed: int, out: Path) -> None:
    """The corpus shards and token files of one natural_language section under out."""
    corpus.main(
        ["--corpus", json.dumps(nl["corpus"]), "--seed", str(seed), "--out", str(out / "corpus")]
    )
    tokens.main(
        [
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
        ]
    )


def score(model, held_out: np.ndarray, short_len: int, long_len: int) -> dict[str, float]:
    """Table 1's perplexity at eval lengths L and Lbar, its relative drop, the mean
    L_short - L_long of the last token (Fig. 4's x axis)."""
    chunks = tokens.consecutive_chunks(held_out, long_len + 1, N_CHUNKS)
    out, by_target = {}, {}
    for length in (short_len, long_len):
        nll = window_nll(model, split_windows(chunks, length), 32)
        out[f"ppl_{length}"] = math.exp(chunk_nll(nll, N_CHUNKS).mean())
        by_target[length] = np.concatenate(np.split(nll, long_len // length), axis=1)  # (N, Lbar)
    # by target position t in the chunk, in bands of 16: the loss at eval length Lbar (t - 1
    # tokens of context), and for t > L the paired gain over eval length L (context restarts at
    # L + 1 there): negative = the far context helps; the gain is what Table 1's drop averages
    for first in range(0, long_len, 16):
        band = slice(first, first + 16)
        out[f"loss_pos{first + 1}"] = float(by_target[long_len][:, band].mean())
        if first >= short_len:
            gain = by_target[long_len][:, band] - by_target[short_len][:, band]
            out[f"gain_pos{first + 1}"] = float(gain.mean())
    out["rel_drop"] = 1 - out[f"ppl_{long_len}"] / out[f"ppl_{short_len}"]
    seqs = tokens.consecutive_chunks(held_out, long_len, N_LOSS, N_CHUNKS * (long_len + 1))
    keep = torch.as_tensor(context_keeps(long_len, short_len, [])[:2])  # L_short, L_long rows
    diffs = []
    for seq in seqs:
        nll = -target_logprob(model, torch.as_tensor(seq), keep)
        diffs.append(float(nll[0] - nll[1]))
    out["mean_short_minus_long"] = float(np.mean(diffs))
    out["sem_short_minus_long"] = float(np.std(diffs, ddof=1) / math.sqrt(len(diffs)))
    return out


def copying(model, short_len: int) -> dict[str, float]:
    """Can the model copy from context (lengen.analysis.copying)? On 64 spans of L / 2 random
    tokens, each written twice: the copy gain, and the largest previous-token and induction
    scores over its heads."""
    vocab = model.cfg.vocab_size
    heads = head_scores(model, vocab, short_len // 2, 64, 0)
    return {
        "copy_gain": repeat_copy_gain(model, vocab, short_len // 2, 64, 0),
        "max_prev_token": float(heads["prev_token"].max()),
        "max_induction": float(heads["induction"].max()),
    }


def run(name: str, rescore: bool = False) -> dict:
    """Build data (if needed), train and score one probe; write its row to the probe table."""
    torch.set_num_threads(1)
    cfg, entry = probe_config(name)
    nl, which = cfg["natural_language"], entry["which"]
    data = data_dir(cfg)
    spec = natural_language.train_spec(cfg, which)
    spec["task"]["train_tokens"] = str(data / "tokens" / "train.bin")
    spec["run_name"] = f"probe/{name}"
    out = Path(cfg["results_dir"]) / f"h_{which}"
    held_out = tokens.load_tokens(data / "tokens" / "validation.bin")
    if entry.get("trained"):  # a model trained elsewhere with this config: score it only
        out = ROOT / entry["trained"]
        wall = float("nan")
    elif rescore:
        wall = float(pd.read_csv(TABLE).set_index("probe").loc[name, "train_wall_s"])
    else:
        tracking.prepare_store(spec["tracking"]["uri"], [spec["tracking"]["experiment"]])
        t0 = time.perf_counter()
        every, ckpt = entry.get("track_every"), spec["train"]["checkpoint_every"]
        if every and every % ckpt:  # track reads the checkpoint written at each stop
            raise SystemExit(
                f"{PROBES}: {name}.track_every ({every}) must be a multiple of "
                f"train.checkpoint_every ({ckpt})"
            )
        for stop in range(every, spec["train"]["steps"], every) if every else []:
            train(spec, out, stop_after=stop)  # then resumes from this step's checkpoint
            scored = time.perf_counter()
            track(name, spec, out, stop, held_out, nl)
            t0 += time.perf_counter() - scored  # train_wall_s counts training only
        train(spec, out)
        wall = time.perf_counter() - t0
    # scored on the CPU (a CPU-tier model): window_nll, target_logprob and copying feed it CPU
    # tensors
    saved = read_model_file(out / "model.pt")
    model = model_from_saved(saved)
    meta = json.loads((data / "tokens" / "meta.json").read_text())
    steps = saved.get("steps_run", spec["train"]["steps"])
    row = {
        "probe": name,
        "which": which,
        "note": entry.get("note", ""),
        "overrides": json.dumps(entry.get("natural_language", {}), sort_keys=True),
        "tokenizer": nl["tokenizer"]["source"],
        "vocab_size": meta["vocab_size"],
        "train_tokens_available": meta["tokens"]["train"],
        "params": model.num_params(),
        "steps_run": steps,
        "tokens_seen": tokens_seen(spec, steps),
        "train_wall_s": round(wall, 1),
        **measure(model, held_out, nl),
    }
    row.update(provenance.record(spec, spec["seed"]))
    append_row(TABLE, row)
    print(
        json.dumps(
            {
                k: row[k]
                for k in (
                    "probe",
                    "train_wall_s",
                    "ppl_64",
                    "ppl_128",
                    "rel_drop",
                    "mean_short_minus_long",
                )
            }
        )
    )
    return row


def tokens_seen(spec: dict, steps: int) -> int:
    """Training tokens a run of the spec has seen after `steps` steps."""
    return steps * spec["train"]["batch_size"] * spec["task"]["context"]


def measure(model, held_out: np.ndarray, nl: dict) -> dict[str, float]:
    """Every column a probe's model is scored on: Table 1's numbers (score) and copying."""
    return {
        **score(model, held_out, nl["short_context"], nl["long_context"]),
        **copying(model, nl["short_context"]),
    }


def track(name: str, spec: dict, out: Path, step: int, held: np.ndarray, nl: dict) -> None:
    """Score the checkpoint at `step` (DeepSpeed's model states, out/ckpt/step_<step>) as the
    final model is scored, and write it as a row (probe, step) of the trajectory table: when
    does copying form, and does the long-context gain move with it?"""
    model = build_model(parse_spec(spec))
    states = out / "ckpt" / f"step_{step}" / "mp_rank_00_model_states.pt"
    model.load_state_dict(torch.load(states, map_location="cpu", weights_only=False)["module"])
    model.eval()
    row = {
        "probe": name,
        "step": step,
        "tokens_seen": tokens_seen(spec, step),
        **measure(model, held, nl),
    }
    append_row(TRAJECTORY, row, key=("probe", "step"))
    print(
        json.dumps(
            {k: row[k] for k in ("probe", "step", "rel_drop", "copy_gain", "max_induction")}
        ),
        flush=True,
    )


def figure(out: Path) -> None:
    """Left: relative perplexity drop from L to Lbar vs tokens seen, one point per probe. Right:
    the far-context gain by target position (bands of 16), one line per probe."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = pd.read_csv(TABLE)
    tracked = pd.read_csv(TRAJECTORY) if TRAJECTORY.exists() else None
    panels = 2 if tracked is None else 3
    fig, (ax, ax2, *ax3) = plt.subplots(
        1, panels, figsize=(7.5 * panels, 4.5), gridspec_kw={"wspace": 0.75}
    )
    if tracked is not None:  # when does copying form, and does the long-context gain follow?
        final = table.set_index("probe")
        for name, rows in tracked.groupby("probe"):
            rows = rows.sort_values("step")
            if name in final.index:  # the finished model is the trajectory's last point
                rows = pd.concat([rows, final.loc[[name]].reset_index()])
            ax3[0].plot(rows.tokens_seen, rows.copy_gain, marker="o", label=f"{name}: copy gain")
            ax3[0].plot(
                rows.tokens_seen,
                rows.max_induction,
                ls="--",
                marker=".",
                label=f"{name}: max induction",
            )
        ax3[0].set(
            xscale="log",
            xlabel="training tokens seen",
            ylabel="nats / attention mass",
            title="copying along training (track_every)",
        )
        ax3[0].legend(fontsize=6)
    bands = [c for c in table.columns if c.startswith("gain_pos")]
    for row in table.dropna(subset=bands).itertuples():
        firsts = [int(c.removeprefix("gain_pos")) for c in bands]
        gain = [getattr(row, c) for c in bands]
        ax2.plot([f + 7.5 for f in firsts], gain, marker=".", label=row.probe)
    ax2.axhline(0, color="grey", lw=0.8)
    ax2.set(
        xlabel="target position t in the 128-token chunk",
        title="far-context gain: NLL with t - 1 tokens minus with t - 65",
        ylabel="mean NLL difference (negative: helps)",
    )
    ax2.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside: many probes
    for row in table.itertuples():
        marker = "o" if row.which == "short" else "s"
        ax.scatter(row.tokens_seen, row.rel_drop, marker=marker)
        ax.annotate(row.probe, (row.tokens_seen, row.rel_drop), fontsize=6)
    ax.axhline(1 - 14.74 / 17.59, color="green", lw=0.8, ls="--", label="paper h_short (16%)")
    ax.set(
        xscale="log",
        xlabel="training tokens seen",
        ylabel="1 - ppl(Lbar) / ppl(L)",
        title="Language probes: long-context gain",
    )
    ax.legend(fontsize=7)
    fig.savefig(out, dpi=150, bbox_inches="tight")
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    """CLI: run probes by name, score them again, list them, or draw the probe figure."""
    probe_cli(__doc__, PROBES, TABLE, run, figure, argv)


if __name__ == "__main__":
    main()

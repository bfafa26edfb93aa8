"""Peak memory and time of the training loss in one piece vs in chunks (runtime.loss_chunk_tokens),
for a language-model head: hidden states (tokens x d_model) times the output matrix, then the
scored cross-entropy of lengen.train.loss.scored_loss, forward and backward, as one micro-batch of
the language models does it.

    python benchmarks/loss_memory.py                                  # CPU, fp32, scaled down
    python benchmarks/loss_memory.py --device cuda --dtype bf16 --tokens 16384 --d-model 2048

The second line is the paper's 1.3B micro-batch (256 x 64 tokens, d_model 2048, 32,000-token
vocabulary, bf16). Each variant runs in a fresh process (on the CPU, peak memory is the process's
peak resident set, which only grows); the extra memory is that peak minus what the inputs and
weights held before the loss ran. On CUDA, torch's own peak counter. Prints one row per variant and
the ratio to the one-piece loss measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch

from lengen.train.loss import scored_loss


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def one(tokens: int, d_model: int, vocab: int, dtype: str, device: str, chunk: int) -> dict:
    """Forward and backward of the loss once (after one untimed run on CUDA), in this process."""
    torch.manual_seed(0)
    dt = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    hidden = torch.randn(tokens, d_model, device=device, dtype=dt, requires_grad=True)
    head = (torch.randn(vocab, d_model, device=device, dtype=dt) / d_model**0.5).requires_grad_()
    labels = torch.randint(0, vocab, (1, tokens), device=device)
    labels[0, : tokens // 4] = -100  # a prompt's worth of unscored tokens

    def run() -> float:
        logits = (hidden @ head.T).unsqueeze(0)
        loss = scored_loss(logits, labels, chunk)
        loss.backward()
        return loss.item()

    if device == "cuda":
        run()
        hidden.grad = head.grad = None
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        before = _rss_bytes()
    t = time.perf_counter()
    loss = run()
    if device == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    seconds = time.perf_counter() - t
    logits_gib = tokens * vocab * dt.itemsize / 2**30
    return {
        "chunk": chunk,
        "loss": loss,
        "seconds": seconds,
        "extra_gib": (peak - before) / 2**30,
        "logits_gib": logits_gib,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--tokens", type=int, default=4096, help="tokens in the micro-batch")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=32_000)
    parser.add_argument(
        "--chunks",
        type=int,
        nargs="+",
        default=[0, 4096, 1024],
        help="chunk sizes in tokens (0: one piece, the baseline)",
    )
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child: this chunk only
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    shape = (args.tokens, args.d_model, args.vocab, args.dtype, args.device)
    if args.one is not None:
        torch.set_num_threads(1)
        print(json.dumps(one(*shape, args.one)))
        return
    rows = []
    for chunk in [0, *[c for c in args.chunks if c]]:
        child = [
            sys.executable,
            __file__,
            "--one",
            str(chunk),
            "--device",
            args.device,
            "--dtype",
            args.dtype,
            "--tokens",
            str(args.tokens),
            "--d-model",
            str(args.d_model),
            "--vocab",
            str(args.vocab),
        ]
        out = subprocess.run(child, capture_output=True, text=True, check=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    base = rows[0]
    print(
        f"{args.device} {args.dtype}: {args.tokens} tokens x {args.vocab} vocabulary, logits "
        f"{base['logits_gib']:.2f} GiB"
    )
    for r in rows:
        r["memory_ratio"] = r["extra_gib"] / base["extra_gib"]
        r["time_ratio"] = r["seconds"] / base["seconds"]
        name = "one piece" if not r["chunk"] else f"chunks of {r['chunk']}"
        print(
            f"  {name:18s} peak extra {r['extra_gib']:6.2f} GiB ({r['memory_ratio']:.2f}x)  "
            f"{r['seconds']:7.3f} s ({r['time_ratio']:.2f}x)  loss {r['loss']:.6f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()

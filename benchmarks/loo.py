"""Leave-one-out speed (Eq. 6): all Lbar - L - 1 masked variants of one example in one batched
forward, against (a) one plain causal forward of the same batch and (b) one forward per mask.

    python benchmarks/loo.py [--config config/config.yaml] [--reps 5]
    python benchmarks/loo.py --config config/paper.yaml --device cuda   # the 1.3B model

(b) is timed twice: with the same last-position head as ours, and as a naive loop that runs the
model's full forward (logits at every position) per mask. Ratios are measured in the same run.
"""

from __future__ import annotations

import argparse
import time

import torch
from throughput import sync  # this folder's (python benchmarks/loo.py)

from lengen.analysis import influence
from lengen.config.config import load
from lengen.core import contexts
from lengen.model.model import GPTNeoX, ModelConfig


def best_time(fn, reps: int, device: str = "cpu") -> float:
    """Best wall time of fn() over reps runs (after one warm-up; on CUDA after its queue ends)."""
    fn()
    best = float("inf")
    for _ in range(reps):
        sync(device)
        t = time.perf_counter()
        fn()
        sync(device)
        best = min(best, time.perf_counter() - t)
    return best


@torch.no_grad()
def main(argv: list[str] | None = None) -> None:
    """Print the three timings per example and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args(argv)
    dev = args.device
    nl = load(args.config)["natural_language"]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = GPTNeoX(ModelConfig(vocab_size=args.vocab, position="rope", **nl["model"])).eval()
    model = model.to(dev)  # fp32, as lengen.analysis.influence scores saved models
    long_len, short_len = nl["long_context"], nl["short_context"]
    x = torch.randint(0, args.vocab, (long_len,), device=dev)
    keep = torch.as_tensor(contexts.loo_keep(long_len, short_len), device=dev)
    n = len(keep)
    ids = torch.arange(1, long_len, device=dev).expand(n, -1)
    inputs = x[:-1].expand(n, -1)

    def batched():
        influence.target_logprob(model, x, keep)

    def plain():
        model.embed_out(model.hidden(inputs, ids)[:, -1])

    def per_mask():
        for row in keep:
            influence.target_logprob(model, x, row[None])

    def per_mask_naive():
        for row in keep:
            model(x[None, :-1], ids[:1], influence.attention_mask(row[None]))

    t_b, t_p = best_time(batched, args.reps, dev), best_time(plain, args.reps, dev)
    t_m, t_n = best_time(per_mask, 1, dev), best_time(per_mask_naive, 1, dev)
    where = torch.cuda.get_device_name() if dev == "cuda" else "1 CPU thread"
    print(
        f"model {nl['model']}, vocab {args.vocab}, Lbar {long_len}, L {short_len}: {n} masks"
        f" ({where}, fp32)"
    )
    print(f"batched leave-one-out (one forward)   {t_b * 1e3:9.1f} ms")
    print(f"plain causal forward, same batch      {t_p * 1e3:9.1f} ms   ratio {t_b / t_p:5.2f}x")
    print(f"one forward per mask, last-token head {t_m * 1e3:9.1f} ms   speedup {t_m / t_b:5.1f}x")
    print(f"one full forward per mask (naive)     {t_n * 1e3:9.1f} ms   speedup {t_n / t_b:5.1f}x")


if __name__ == "__main__":
    main()

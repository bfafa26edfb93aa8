"""DeepSpeed's own estimate of the GPU and CPU memory the language models' parameters, gradients
and optimizer states need under ZeRO stage 2, from a tier's config (no GPU needed: the model is
built on the meta device, only to count its parameters).

    python benchmarks/ds_memory.py [--config config/paper.yaml] [--nodes 1]

Activations come on top and depend on the micro-batch (natural_language.*.train.micro_batch_size).
"""

from __future__ import annotations

import argparse

import torch

from lengen.config.config import load
from lengen.model.model import GPTNeoX, ModelConfig
from lengen.tasks import natural_language

VOCAB = 32_000  # Llama-2's and mistral v1's vocabulary size


def main(argv: list[str] | None = None) -> None:
    """Print the parameter count and DeepSpeed's ZeRO-2 memory table for h_short."""
    from deepspeed.runtime.zero.stage_1_and_2 import (
        estimate_zero2_model_states_mem_needs_all_cold,
    )

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/paper.yaml")
    parser.add_argument("--nodes", type=int, default=1)
    args = parser.parse_args(argv)
    cfg = load(args.config)
    spec = natural_language.train_spec(cfg, "short")
    with torch.device("meta"):  # the tokenizer's 32,000 ids (App. F), before any corpus exists
        params = GPTNeoX(ModelConfig(vocab_size=VOCAB, **spec["model"])).num_params()
    gpus = cfg["natural_language"].get("gpus_per_job", cfg["runtime"]["gpus_per_job"])
    print(f"{args.config}: language model with {params / 1e6:.0f} M parameters, {gpus} GPUs/node")
    estimate_zero2_model_states_mem_needs_all_cold(params, gpus, args.nodes)


if __name__ == "__main__":
    main()

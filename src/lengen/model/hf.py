"""Conversion of a lengen GPT-NeoX to transformers' GPTNeoXForCausalLM with the same weights
(used to check equal outputs and to compare speed; also handy to reuse HF tooling).

No workflow job imports this module: it holds the check that our GPT-NeoX is transformers' own
(tests/test_model.py, equal outputs in fp32 and bf16) and the baseline of benchmarks/throughput.py;
`lengen influence` reads any Hugging Face directory without it.
"""

from __future__ import annotations

from lengen.model.model import GPTNeoX


def to_transformers(model: GPTNeoX, attn_implementation: str = "sdpa"):
    """transformers' GPTNeoXForCausalLM with the same sizes and weights as `model`."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    c = model.cfg
    if c.position != "rope":
        raise ValueError("transformers' GPT-NeoX has RoPE only; got position=" + repr(c.position))
    hf = GPTNeoXForCausalLM(
        GPTNeoXConfig(
            vocab_size=c.vocab_size,
            hidden_size=c.d_model,
            num_hidden_layers=c.n_layer,
            num_attention_heads=c.n_head,
            intermediate_size=c.mlp_dim,
            rotary_pct=c.rotary_pct,
            rotary_emb_base=c.rope_base,
            layer_norm_eps=c.layer_norm_eps,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            use_parallel_residual=True,
            tie_word_embeddings=False,
            max_position_embeddings=4096,
            attn_implementation=attn_implementation,
        )
    )
    state = {
        ("lm_head.weight" if k == "embed_out.weight" else f"gpt_neox.{k}"): v
        for k, v in model.state_dict().items()
    }
    missing, unexpected = hf.load_state_dict(state, strict=False)
    if unexpected or any("inv_freq" not in m for m in missing):
        raise RuntimeError(f"weight mapping failed: missing={missing}, unexpected={unexpected}")
    return hf.eval()

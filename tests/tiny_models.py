"""The small random Llama several tests train or load: 2 layers, hidden 32, 4 heads (2 KV)."""

from __future__ import annotations

from typing import Any


def tiny_llama(vocab_size: int, max_positions: int, **overrides: Any):
    """A fresh random LlamaForCausalLM; seed torch first for reproducible weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        **overrides,
    )
    return LlamaForCausalLM(config)

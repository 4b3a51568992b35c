"""A tiny random Llama with SmolLM2's real tokenizer and chat template, as a Hugging Face folder:
its replies are nonsense, but every piece of the machinery (download, store, GPU upload, the
greedy loop, the cache) runs on it in a fraction of the real model's time on a CPU "GPU"."""

import json
import shutil

import numpy as np

from chatlens.config import ModelConfig
from chatlens.host.export import save_safetensors

TINY = dict(n_layers=2, dim=64, n_heads=4, n_kv_heads=2, head_dim=16, ffn_dim=96, rope_base=10000.0,
            norm_eps=1e-5, tied_output=True)


def write_tiny_model(folder, tokenizer_folder, seed=0, **shape):
    """The folder, with config.json and model.safetensors (f32) made here and the tokenizer files
    copied from `tokenizer_folder` (a Hugging Face folder of SmolLM2). `shape` overrides TINY's
    figures (n_layers=16: a GPU step of more than 64 dispatches, which the page runs in parts)."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab = json.loads((tokenizer_folder / "config.json").read_text())["vocab_size"]
    cfg = ModelConfig(vocab_size=vocab, n_ctx=2048, **{**TINY, **shape})
    rng = np.random.default_rng(seed)

    def w(*shape):
        return (3 * rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)

    q, kv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    weights = {"model.embed_tokens.weight": w(vocab, cfg.dim), "model.norm.weight": np.ones(cfg.dim, np.float32)}
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}."
        weights.update({
            p + "input_layernorm.weight": np.ones(cfg.dim, np.float32),
            p + "post_attention_layernorm.weight": np.ones(cfg.dim, np.float32),
            p + "self_attn.q_proj.weight": w(q, cfg.dim), p + "self_attn.k_proj.weight": w(kv, cfg.dim),
            p + "self_attn.v_proj.weight": w(kv, cfg.dim), p + "self_attn.o_proj.weight": w(cfg.dim, q),
            p + "mlp.gate_proj.weight": w(cfg.ffn_dim, cfg.dim), p + "mlp.up_proj.weight": w(cfg.ffn_dim, cfg.dim),
            p + "mlp.down_proj.weight": w(cfg.dim, cfg.ffn_dim)})
    save_safetensors(weights, folder / "model.safetensors", dtype="F32", metadata={"format": "pt"})
    real = json.loads((tokenizer_folder / "config.json").read_text())
    config = {**cfg.to_hf(), "torch_dtype": "float32", "bos_token_id": real.get("bos_token_id"),
              "eos_token_id": real.get("eos_token_id"), "pad_token_id": real.get("pad_token_id")}
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if (tokenizer_folder / name).exists():
            shutil.copy(tokenizer_folder / name, folder / name)
    return folder

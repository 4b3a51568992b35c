"""The Llama architecture as SmolLM2 uses it, in float32 NumPy, read top to bottom.

Weights are a dict of Hugging Face names -> arrays in Hugging Face's layout (out, in), so
`x @ W.T` is every projection. Sizes come only from ModelConfig.
"""

import numpy as np

from .backend import Step, top_k_of
from .config import ModelConfig
from .errors import ChatlensError

PREFILL_CHUNK = 256  # bounds the (heads, chunk, context) score matrix for long prompts


def rms_norm(x, weight, eps):
    variance = np.mean(x * x, axis=-1, keepdims=True)
    return weight * (x * (1.0 / np.sqrt(variance + eps)))


def rope_tables(cfg: ModelConfig, n_positions: int):
    """cos and sin for every position, (n_positions, head_dim), computed in float32 as transformers does."""
    exponent = np.arange(0, cfg.head_dim, 2, dtype=np.int64).astype(np.float32) / np.float32(cfg.head_dim)
    inv_freq = np.float32(1.0) / (np.float32(cfg.rope_base) ** exponent)
    freqs = np.arange(n_positions, dtype=np.float32)[:, None] * inv_freq[None, :]
    angles = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(angles), np.sin(angles)


def rope(x, cos, sin):
    """Rotate pairs (i, i + head_dim/2): x is (heads, T, head_dim), cos/sin are (T, head_dim)."""
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def attention(q, k, v, start):
    """Causal grouped-query attention of T new queries at positions start.. over k, v (kv_heads, start+T, hd)."""
    n_heads, T, hd = q.shape
    n_kv, L, _ = k.shape
    group = n_heads // n_kv
    q = q.reshape(n_kv, group * T, hd)  # query heads h = kv * group + j share kv head `kv`
    scores = (q @ k.transpose(0, 2, 1)) * np.float32(1.0 / np.sqrt(hd))
    scores = scores.reshape(n_kv, group, T, L)
    if T > 1:
        future = np.arange(L)[None, :] > (start + np.arange(T))[:, None]
        scores = np.where(future, np.float32(-np.inf), scores)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = scores / scores.sum(axis=-1, keepdims=True)
    out = probs.reshape(n_kv, group * T, L) @ v  # (n_kv, group*T, hd)
    return out.reshape(n_heads, T, hd).transpose(1, 0, 2).reshape(T, n_heads * hd)


def silu(x):
    with np.errstate(over="ignore"):
        return x / (np.float32(1.0) + np.exp(-x))


def split_heads(x, n):
    """(T, n * hd) -> (n, T, hd)"""
    T = x.shape[0]
    return x.reshape(T, n, -1).transpose(1, 0, 2)


class NumpyBackend:
    """The model with a KV cache preallocated for `n_ctx` tokens (see chatlens.backend.Backend)."""

    name = "numpy"

    def __init__(self, cfg: ModelConfig, weights: dict, n_ctx: int):
        if n_ctx > cfg.n_ctx:
            raise ChatlensError(f"a context of {n_ctx} tokens is longer than the model's {cfg.n_ctx}")
        self.cfg, self.capacity, self.length = cfg, n_ctx, 0
        self.embed = weights["model.embed_tokens.weight"]
        self.lm_head = self.embed if cfg.tied_output else weights["lm_head.weight"]
        self.final_norm = weights["model.norm.weight"]
        self.layers = [_Layer(weights, f"model.layers.{i}.") for i in range(cfg.n_layers)]
        shape = (cfg.n_layers, cfg.n_kv_heads, n_ctx, cfg.head_dim)
        self.k_cache, self.v_cache = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
        self.cos, self.sin = rope_tables(cfg, n_ctx)
        self.logits = None  # the last step's logits (vocab,): for tests and views, not the seam

    def prefill(self, ids, top_k=0) -> Step:
        ids = list(ids)
        if not ids:
            raise ChatlensError("prefill needs at least one token")
        for i in range(0, len(ids), PREFILL_CHUNK):
            x = self._forward(ids[i:i + PREFILL_CHUNK])
        return self._step(x[-1], top_k)

    def decode(self, token_id, top_k=0) -> Step:
        return self._step(self._forward([token_id])[-1], top_k)

    def last_logits(self):
        return self.logits

    def _step(self, x, top_k):
        self.logits = self._logits(x)  # (dim,) -> (vocab,)
        return Step(int(np.argmax(self.logits)), top_k_of(self.logits, top_k))

    def truncate(self, n):
        self.length = max(0, min(n, self.length))

    def reset(self):
        self.length = 0

    def _forward(self, ids):
        start, T = self.length, len(ids)
        if start + T > self.capacity:
            raise ChatlensError(f"the KV cache holds {self.capacity} tokens; {start} + {T} do not fit")
        if max(ids) >= self.cfg.vocab_size or min(ids) < 0:
            raise ChatlensError(f"token id out of range 0..{self.cfg.vocab_size - 1}")
        x = self.embed[ids]
        cos, sin = self.cos[start:start + T], self.sin[start:start + T]
        for i, layer in enumerate(self.layers):
            x = self._block(x, layer, i, start, cos, sin)
        self.length = start + T
        return x

    def _block(self, x, w, i, start, cos, sin):
        cfg, end = self.cfg, start + x.shape[0]
        h = rms_norm(x, w.attn_norm, cfg.norm_eps)
        q = rope(split_heads(h @ w.q.T, cfg.n_heads), cos, sin)
        self.k_cache[i, :, start:end] = rope(split_heads(h @ w.k.T, cfg.n_kv_heads), cos, sin)
        self.v_cache[i, :, start:end] = split_heads(h @ w.v.T, cfg.n_kv_heads)
        x = x + attention(q, self.k_cache[i, :, :end], self.v_cache[i, :, :end], start) @ w.o.T
        h = rms_norm(x, w.mlp_norm, cfg.norm_eps)
        return x + (silu(h @ w.gate.T) * (h @ w.up.T)) @ w.down.T

    def _logits(self, x):
        return rms_norm(x, self.final_norm, self.cfg.norm_eps) @ self.lm_head.T


class _Layer:
    def __init__(self, weights, p):
        self.attn_norm = weights[p + "input_layernorm.weight"]
        self.q = weights[p + "self_attn.q_proj.weight"]
        self.k = weights[p + "self_attn.k_proj.weight"]
        self.v = weights[p + "self_attn.v_proj.weight"]
        self.o = weights[p + "self_attn.o_proj.weight"]
        self.mlp_norm = weights[p + "post_attention_layernorm.weight"]
        self.gate = weights[p + "mlp.gate_proj.weight"]
        self.up = weights[p + "mlp.up_proj.weight"]
        self.down = weights[p + "mlp.down_proj.weight"]

"""The Llama architecture as SmolLM2 uses it, in float32 NumPy, read top to bottom.

Weights are a dict of Hugging Face names -> arrays in Hugging Face's layout (out, in), used as
they are: one float32 copy of each, which is what the browser copies into its heap. Sizes come
only from ModelConfig.

Every product goes through one of two sets of operations, chosen once by how this NumPy was
built (`HAS_BLAS`, `PRODUCTS`). With a BLAS (CPython's NumPy wheels), matmul is BLAS's sgemm and
sgemv: `x @ W.T` (`MATMUL`). Without one (Pyodide's NumPy), matmul is a scalar loop, and einsum's
vectorised loops compute the same products 4 to 6 times faster (`EINSUM`).
"""

import numpy as np

from .backend import Regrows, Step, log_z_of, step_of
from .config import ModelConfig
from .errors import ChatlensError

PREFILL_CHUNK = 256  # bounds the (heads, chunk, context) score matrix for long prompts
HEAD_ROWS = 1024  # scored rows the head takes at once: bounds their logits (rows, vocab) to 200 MB


def has_blas() -> bool:
    """Whether this NumPy was built with a BLAS, from the build configuration NumPy >= 1.26
    records: {"name": "scipy-openblas", "found": True, ...} in CPython's wheels, {"name": "none"}
    in Pyodide's and in any build with -Dblas=none. A NumPy that records nothing is taken to
    have one (matmul, what this module always used)."""
    try:
        blas = np.__config__.CONFIG["Build Dependencies"]["blas"]
    except (AttributeError, KeyError, TypeError):
        return True
    return bool(blas.get("found")) and str(blas.get("name", "none")).lower() != "none"


HAS_BLAS = has_blas()


class MatmulProducts:
    """The forward pass's three kinds of product through matmul: BLAS's sgemm and sgemv."""

    name = "matmul"
    # OpenBLAS's sgemm with a few rows is slower than a matvec a row: the output projection
    # (49152 x 576) took 24 ms for 2 rows against 8.3 ms for one, a 1536 x 576 weight 0.51 ms
    # against 0.095 (one thread, this machine). 3 rows and fewer go a matvec each (a cause's
    # passes over a reply's first tokens); from 4, sgemm (8 rows: 27 ms against 66).
    FEW_ROWS = 3

    @staticmethod
    def linear(x, w):
        """x times the weight w transposed: (T, in), (out, in) -> (T, out)."""
        if 1 < x.shape[0] <= MatmulProducts.FEW_ROWS:
            return np.stack([w @ row for row in x])  # (in,) -> (out,) a row
        return x @ w.T

    @staticmethod
    def scores(q, k):
        """Queries against keys: (g, m, hd), (g, L, hd) -> (g, m, L)."""
        return q @ k.transpose(0, 2, 1)

    @staticmethod
    def mix(p, v):
        """Attention weights times values: (g, m, L), (g, L, hd) -> (g, m, hd)."""
        return p @ v


class EinsumProducts(MatmulProducts):
    """The same products through einsum, for a NumPy without BLAS, whose matmul is a scalar
    loop: einsum has vectorised loops, and chooses among them by its operands' strides.

    One row against w (decoding): a dot product per output along the contiguous `in` axis.
    Many rows (prefill): the rows transposed to (in, T), so the innermost loop scales T
    contiguous inputs by one weight into T contiguous outputs (a multiply-add without a chain
    of dependent additions), and w is read once, not once a row. Attention runs along
    positions, contiguous in the cache's layout (NumpyBackend).

    Measured on NumPy 2.4 built without BLAS (CPU time, 2-core Xeon): a 1536x576 matvec 0.19 ms
    against matmul's 0.8-1.1 ms; 256 rows 45 ms against 60 ms as dot products and 290 ms with
    matmul; the model's prefill 5.5x and a decode step 2.2x faster than with matmul. With a
    BLAS, matmul stays the faster: the model's prefill is 4-6x einsum's."""

    name = "einsum"
    ROWS_FOR_MULTIPLY_ADD = 96  # fewer rows: a dot product per output is as fast or faster

    @staticmethod
    def linear(x, w):
        if x.shape[0] < EinsumProducts.ROWS_FOR_MULTIPLY_ADD:
            return np.einsum("tk,nk->tn", x, w)  # (T, in), (out, in) -> (T, out)
        return np.einsum("kt,nk->tn", np.ascontiguousarray(x.T), w)  # (in, T), (out, in) -> (T, out)

    @staticmethod
    def scores(q, k):
        return np.einsum("gmd,gld->gml", q, k)  # (g, m, hd), (g, L, hd) -> (g, m, L)

    @staticmethod
    def mix(p, v):
        return np.einsum("gml,gld->gmd", p, v)  # (g, m, L), (g, L, hd) -> (g, m, hd)


MATMUL, EINSUM = MatmulProducts, EinsumProducts
PRODUCTS = MATMUL if HAS_BLAS else EINSUM  # this NumPy's choice: the default below


def rms_norm(x, weight, eps):
    # np.add.reduce / n is np.mean's own arithmetic, without its Python-level checks (10 us a call)
    variance = np.add.reduce(x * x, axis=-1, keepdims=True) / x.shape[-1]
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


def attention(q, k, v, start, products=None, probe=None, hidden=None):
    """Causal grouped-query attention of T new queries at positions start.. over k, v (kv_heads, start+T, hd);
    `products`: MATMUL or EINSUM (default: this NumPy's choice, PRODUCTS); `probe`: a Probe that keeps
    the weights (an inspection's); `hidden`: ((a, b), ...), the key ranges a..b-1 that none of the T
    queries may read (pieces knocked out, chatlens.cause), or None."""
    mm = products or PRODUCTS
    n_heads, T, hd = q.shape
    n_kv, L, _ = k.shape
    group = n_heads // n_kv
    q = q.reshape(n_kv, group * T, hd)  # query heads h = kv * group + j share kv head `kv`
    scores = mm.scores(q, k) * np.float32(1.0 / np.sqrt(hd))  # (n_kv, group*T, L)
    scores = scores.reshape(n_kv, group, T, L)
    if T > 1:
        future = np.arange(L)[None, :] > (start + np.arange(T))[:, None]
        scores = np.where(future, np.float32(-np.inf), scores)
    for a, b in hidden or ():
        scores[..., a:b] = -np.inf  # every query of the call, as transformers' 4D mask
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = scores / scores.sum(axis=-1, keepdims=True)  # (n_kv, group, T, L)
    if probe is not None:
        probe.attention.append(probs.reshape(n_heads, T, L))  # query head h = kv * group + j, as q was split
    out = mm.mix(probs.reshape(n_kv, group * T, L), v)  # (n_kv, group*T, hd)
    return out.reshape(n_heads, T, hd).transpose(1, 0, 2).reshape(T, n_heads * hd)


class Probe:
    """What an inspection keeps of one forward pass (NumpyBackend.inspect): each layer's attention
    weights, (heads, T, start+T) a layer, and each block's output at the last token, (dim,) a block."""

    def __init__(self):
        self.attention, self.blocks = [], []


def scored(logits, targets) -> list:
    """Each row of logits (R, vocab) against its target id (R,): (target_logit, log_z, top_id,
    top_logit), p(target) = exp(target_logit - log_z), top the argmax (lowest id among equal maxima)."""
    out = []
    for row, target in zip(logits, targets):
        top = int(np.argmax(row))
        out.append((float(row[target]), log_z_of(row), top, float(row[top])))
    return out


def silu(x):
    with np.errstate(over="ignore"):
        return x / (np.float32(1.0) + np.exp(-x))


def split_heads(x, n):
    """(T, n * hd) -> (n, T, hd)"""
    T = x.shape[0]
    return x.reshape(T, n, -1).transpose(1, 0, 2)


class NumpyBackend(Regrows):
    """The model with a KV cache preallocated for `n_ctx` tokens (see chatlens.backend.Backend);
    `products`: MATMUL or EINSUM (default: this NumPy's choice, PRODUCTS)."""

    name = "numpy"
    chunk = PREFILL_CHUNK  # prompt ids a step takes (chatlens.generate feeds longer prompts in chunks)

    def __init__(self, cfg: ModelConfig, weights: dict, n_ctx: int, products=None):
        if n_ctx > cfg.n_ctx:
            raise ChatlensError(f"a context of {n_ctx} tokens is longer than the model's {cfg.n_ctx}")
        self.cfg, self.capacity, self.length = cfg, n_ctx, 0
        self.products = products or PRODUCTS
        self.embed = weights["model.embed_tokens.weight"]
        self.lm_head = self.embed if cfg.tied_output else weights["lm_head.weight"]
        self.final_norm = weights["model.norm.weight"]
        self.layers = [_Layer(weights, f"model.layers.{i}.") for i in range(cfg.n_layers)]
        # Positions innermost: attention reads k and v as (kv_heads, L, hd) views whose positions
        # are contiguous, so einsum's loops run along positions (without BLAS 1.2x faster than
        # (kv_heads, n_ctx, hd); matmul is as fast either way).
        shape = (cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, n_ctx)
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

    def inspect(self, token_id):
        """decode(token_id), keeping what an inspection shows (chatlens.inspection): returns
        (attention, blocks), attention (layers, heads, length) the token's softmax weights over every
        cached position and its own, blocks (layers, dim) each block's output at it. Like decode,
        the token's keys and values stay in the cache, and `logits` holds the head's."""
        probe = Probe()
        x = self._forward([int(token_id)], probe)  # (1, dim)
        self.logits = self._logits(x[-1])  # (dim,) -> (vocab,): the step decode would take
        return np.stack([a[:, -1] for a in probe.attention]), np.stack(probe.blocks)  # (layers, heads, L), (layers, dim)

    def score(self, ids, *, score_from, next_id, hidden=None):
        """Feed ids after the cache as prefill does (the key ranges `hidden`, ((a, b), ...), hidden
        from every one of them: chatlens.cause's knockout) and score rows score_from.. of them: row r is
        the step after ids[r], its target ids[r + 1], the last row's `next_id`. Returns one
        (target_logit, log_z, top_id, top_logit) a scored row: p(target) = exp(target_logit -
        log_z), the row's argmax (lowest id among equal maxima) and its logit. The ids' keys and
        values are cached as prefill's (hidden ones too: the caller truncates them away)."""
        ids = [int(i) for i in ids]
        if not ids or not 0 <= score_from < len(ids):
            raise ChatlensError(f"a score needs ids and a first scored row among them, not {score_from} of {len(ids)}")
        rows = []
        for at in range(0, len(ids), PREFILL_CHUNK):
            x = self._forward(ids[at:at + PREFILL_CHUNK], hidden=hidden)  # (T, dim)
            rows.append(x[max(score_from - at, 0):])
        return self._scored(np.concatenate(rows), ids[score_from + 1:] + [int(next_id)])  # (R, dim), (R,)

    def grow(self, n_ctx):
        """Room for n_ctx tokens, what the cache holds kept (a cause whose counterfactual is longer
        than the window, chatlens.cause: the turn stays cached for the next one)."""
        if n_ctx > self.cfg.n_ctx:
            raise ChatlensError(f"a context of {n_ctx} tokens is longer than the model's {self.cfg.n_ctx}")
        if n_ctx <= self.capacity:
            return
        shape = self.k_cache.shape[:-1] + (n_ctx,)
        for name in ("k_cache", "v_cache"):
            bigger = np.zeros(shape, np.float32)
            bigger[..., :self.length] = getattr(self, name)[..., :self.length]
            setattr(self, name, bigger)
        self.cos, self.sin = rope_tables(self.cfg, n_ctx)
        self.capacity = n_ctx

    def score_many(self, runs):
        """score() for several passes at once: runs ((start, ids, score_from, next_id, hidden), ...),
        each fed after the cache's first `start` positions, as if each were score()d in turn after a
        truncate(start). One forward whose projections take every pass's rows (a matrix of weights
        read once, not once a pass), a list of scored rows a pass. Starts may not increase, so each
        pass reads only what the cache held before the call (a later pass writes its keys at or
        before an earlier one's, after it read them: `_forward`); each pass's ids fit PREFILL_CHUNK.
        Afterwards the cache holds what it held before the last pass's start, then that pass's keys
        and values (hidden ones too: the caller truncates them away)."""
        runs = [(int(s), [int(i) for i in ids], int(f), int(n), h) for s, ids, f, n, h in runs]
        for _, ids, score_from, _, _ in runs:
            if not ids or len(ids) > PREFILL_CHUNK or not 0 <= score_from < len(ids):
                raise ChatlensError(f"a batch of passes takes 1 to {PREFILL_CHUNK} ids a pass and a first scored row among them")
        starts = [start for start, *_ in runs]
        if not runs or starts[0] > self.length or any(b > a for a, b in zip(starts, starts[1:])):
            raise ChatlensError(f"a batch of passes starts at or before the cache's {self.length}, each no later than the one before, not {starts}")
        x = self._forward(passes=[(start, ids, hidden) for start, ids, _, _, hidden in runs])  # (sum of T, dim)
        rows, targets, at = [], [], 0
        for _, ids, score_from, next_id, _ in runs:
            rows.append(x[at + score_from:at + len(ids)])  # (R_b, dim): the pass's scored rows
            targets.append(ids[score_from + 1:] + [next_id])  # (R_b,)
            at += len(ids)
        every = self._scored(np.concatenate(rows), [t for ts in targets for t in ts])  # (sum of R, dim)
        out, at = [], 0
        for ts in targets:
            out.append(every[at:at + len(ts)])
            at += len(ts)
        return out

    def _scored(self, x, targets) -> list:
        """The head over rows x (R, dim) against their targets (R,): scored()'s rows, in blocks of
        at most HEAD_ROWS of equal size (one thread's sgemm here: 582 rows in 227 ms at once, 281 ms
        in two halves)."""
        blocks = -(-len(x) // HEAD_ROWS)
        size = -(-len(x) // blocks)
        out = []
        for at in range(0, len(x), size):
            logits = self.products.linear(rms_norm(x[at:at + size], self.final_norm, self.cfg.norm_eps), self.lm_head)  # (size, dim) -> (size, vocab)
            out += scored(logits, targets[at:at + size])
        self.logits = logits[-1]
        return out

    def kept(self, start):
        """A copy of the cache's keys and values from position `start` to its length, for
        put_back: what a run that overwrites them (chatlens.cause's counterfactuals) restores."""
        if not 0 <= start <= self.length:
            raise ChatlensError(f"cannot keep the cache from {start}: it holds {self.length}")
        return start, self.k_cache[..., start:self.length].copy(), self.v_cache[..., start:self.length].copy()

    def put_back(self, kept):
        """The cache as kept(start) saw it: those positions written back, its length theirs."""
        start, k, v = kept
        end = start + k.shape[-1]
        if self.length < start:
            raise ChatlensError(f"cannot put back positions {start}.. into a cache of {self.length}: a gap would stay")
        self.k_cache[..., start:end], self.v_cache[..., start:end] = k, v
        self.length = end

    def last_logits(self):
        return self.logits

    def _step(self, x, top_k):
        self.logits = self._logits(x)  # (dim,) -> (vocab,)
        return step_of(self.logits, top_k)  # the argmax; with top_k also log_z

    def truncate(self, n):
        self.length = max(0, min(n, self.length))

    def reset(self):
        self.length = 0

    def _forward(self, ids=None, probe=None, hidden=None, passes=None):
        """The ids fed after the cache, (T, dim) out. passes: several passes at once instead,
        ((start, ids, hidden), ...), each fed after the cache's first `start` positions, the keys
        `hidden` hidden from it (None: none), starts not increasing: their rows, (sum of T, dim),
        pass after pass. In each layer a pass writes its keys and values over the slots from its
        start, then reads the cache up to them: the passes before it wrote only from their starts,
        at or after its own, so what it reads before its start is what the cache held. The last
        pass's keys and values stay, and the cache's length is its end."""
        passes = [(self.length, list(ids), hidden)] if passes is None else passes
        for start, ids_, _ in passes:
            if start + len(ids_) > self.capacity:
                raise ChatlensError(f"the KV cache holds {self.capacity} tokens; {start} + {len(ids_)} do not fit")
            if max(ids_) >= self.cfg.vocab_size or min(ids_) < 0:
                raise ChatlensError(f"token id out of range 0..{self.cfg.vocab_size - 1}")
        x = self.embed[[i for _, ids_, _ in passes for i in ids_]]  # (sum of T, dim)
        for i, layer in enumerate(self.layers):
            x = self._block(x, layer, i, passes, probe)
            if probe is not None:
                probe.blocks.append(x[-1])  # (dim,): the block's output, the logit lens's input
        start, ids_, _ = passes[-1]
        self.length = start + len(ids_)
        return x

    def _block(self, x, w, i, passes, probe=None):
        """One decoder layer on x (sum of T, dim), the rows of `passes` ((start, ids, hidden), ...; one,
        but for a cause's batch): attention over the cache, then the MLP, each added to x. The
        projections take every pass's rows at once; attention goes a pass at a time."""
        cfg, mm = self.cfg, self.products
        h = rms_norm(x, w.attn_norm, cfg.norm_eps)  # (sum T, dim)
        qs, ks, vs = mm.linear(h, w.q), mm.linear(h, w.k), mm.linear(h, w.v)  # (sum T, dim) -> (sum T, heads*hd), (sum T, kv*hd) x2
        out, at = [], 0
        for start, ids, hidden in passes:
            T = len(ids)
            rows, cos, sin = slice(at, at + T), self.cos[start:start + T], self.sin[start:start + T]  # (T, hd) x2
            at += T
            q = rope(split_heads(qs[rows], cfg.n_heads), cos, sin)  # (T, heads*hd) -> (heads, T, hd)
            k = rope(split_heads(ks[rows], cfg.n_kv_heads), cos, sin)  # (T, kv*hd) -> (kv_heads, T, hd)
            v = split_heads(vs[rows], cfg.n_kv_heads)  # (T, kv*hd) -> (kv_heads, T, hd)
            k, v = self._cached(self.k_cache[i], start, k), self._cached(self.v_cache[i], start, v)  # (kv_heads, start+T, hd)
            out.append(attention(q, k, v, start, mm, probe, hidden))  # (T, heads * hd)
        a = out[0] if len(out) == 1 else np.concatenate(out)  # (sum T, heads * hd)
        x = x + mm.linear(a, w.o)  # (sum T, heads * hd) -> (sum T, dim)
        h = rms_norm(x, w.mlp_norm, cfg.norm_eps)  # (sum T, dim)
        g = silu(mm.linear(h, w.gate)) * mm.linear(h, w.up)  # (sum T, dim) -> (sum T, ffn)
        return x + mm.linear(g, w.down)  # (sum T, ffn) -> (sum T, dim)

    @staticmethod
    def _cached(cache, start, new):
        """Store `new` (kv_heads, T, hd) in one layer's cache (kv_heads, hd, n_ctx) at positions
        start..; every position up to them, as (kv_heads, start+T, hd)."""
        by_position = cache.transpose(0, 2, 1)  # (kv_heads, n_ctx, hd), a view
        by_position[:, start:start + new.shape[1]] = new
        return by_position[:, :start + new.shape[1]]

    def _logits(self, x):
        return self.products.linear(rms_norm(x, self.final_norm, self.cfg.norm_eps)[None], self.lm_head)[0]  # (dim,) -> (vocab,)


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

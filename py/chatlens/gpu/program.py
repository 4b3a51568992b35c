"""The forward pass of model.py as one GPU program, defined once for every host.

`build_program(plan, n_ctx, features, limits)` turns a weight plan (weights.py) and what the
adapter offers into builder.py's plain data: the weights uploaded as the source stores them
(quantized blocks regrouped so every load is aligned: kernels.LAYOUTS), the activations, the
KV cache (f32 or f16: KV_CACHE), and these sequences of dispatches:

    prefill  embedding + every layer for a chunk of up to `chunk` tokens (tiled matmuls)
    decode   embedding + every layer for one token (matvecs), its id from the step or the last argmax
    prefill_short, decode_short   the same while the keys (start + tokens) fit one attention
             workgroup (meta["short"]["keys"]): attention writes its output directly, with no
             partials to merge. Only a program whose context is longer has them; a shorter
             one's prefill and decode are already so.
    head     final norm + output projection of the chunk's last token, argmax
    top_k    the best step.top_k (id, logit) pairs of the logits, and the softmax's normalizer
             (run only when a step asks for top-k: the argmax path never pays for it)
    inspect, inspect_short   decode's step for one token (its keys and values cached as decode's)
             that also keeps, for chatlens.inspection, each layer's attention weights (one more
             dispatch a layer: attention_weights) and each block's output (the down projection's
             epilogue copies it: residual_keep), run only for an inspection
    lens     the logit lens of those block outputs: final norm + output projection of each (a
             matvec a layer, the head's own kernel reading the layer's row), then the best
             step.top_k (id, logit) pairs and the normalizer of every layer (top_k over rows)
    prefill_hidden, prefill_hidden_short   prefill's, its attention compiled with HIDDEN: keys
             step.hidden_start..hidden_end-1 hidden from every token of the chunk (model.attention's
             `hidden`, chatlens.cause's knockout); the same dispatches, only attention's pipelines
             are their own, so no other sequence reads those fields. Any chunk of 1 to `chunk`
             tokens takes them (a lone token too: there is no hidden decode).
    score    final norm + output projection of every row of the chunk into score_logits (T,
             vocab), then for rows step.score_from.. each row's target logit, max, sum of exp and
             argmax (NumpyBackend.score's figures, read back as `score`). It follows a prefill
             body: a score run is [prefill(_hidden)(_short), "score"] (WebGPUBackend.plan_score).

An inspection runs ["inspect", "lens"] and reads back one buffer, `inspection`: each layer's
top-k as the top_k readback lays it out (K_MAX pairs, then max and sum of exp), layer after
layer, then at meta["inspect"]["attention_at"] the attention weights (layers, heads, keys) packed
for the step's keys (chatlens.gpu.backend.read_inspect). Which layer a shared kernel serves comes
from a 4-byte buffer per layer (L<i>.index) bound beside it, not from a constant: one pipeline
serves every layer, as in decode.

A scored run (chatlens.cause: a counterfactual pass's rows) runs [body, "score"] and reads back
`score`: (target logit, max, sum of exp(logit - max), argmax id) a row, 16 bytes, row r at 16 * r
(chatlens.gpu.backend.read_score).

A step runs e.g. ["decode", "head"] in one compute pass after writing `step_params(...)`. A
decode step takes 5 dispatches a layer at every context length (q/k/v, attention, o, gate/up,
down): past one attention workgroup's keys the o projection merges the attention's splits as
it loads them (kernels.Partials; a model with more heads x splits than kernels.MERGE_MAX takes a
merge pass instead). A prefill chunk past them takes 6: its merge is a pass of its
own, done once for the chunk's 128 tokens instead of in each of the o matmul's tiles.
Pure Python (no NumPy, no wgpu): Pyodide builds the same program for the browser's executor.
"""

import math
import struct

from ..config import ModelConfig
from ..defaults import IN_FLIGHT
from ..errors import ChatlensError
from . import kernels as K
from .builder import ProgramBuilder, align
from .kernels import Matrix, Target

CHUNK = 128  # prefill tokens per dispatch sequence: bounds the activations and a dispatch's length
TOP_K_MAX = 64  # most (id, logit) pairs the GPU top-k finds
SPLIT_MIN = 32  # fewest keys an attention split takes
# u32 words of the step buffer, in order (wgsl/step.wgsl); the chunk's ids follow, then n_hidden
# (a, b) pairs. hidden_start, hidden_end (the ranges' envelope), score_from, next_id and n_hidden
# are read only by the hidden attention and the score kernels.
STEP_FIELDS = ("n_tokens", "start", "split", "use_argmax", "top_k", "hidden_start", "hidden_end", "score_from",
               "next_id", "n_hidden", "pad1", "pad2")
# The most key ranges one knockout hides (pieces together: every earlier reply of a conversation).
MAX_HIDDEN = 32
DEFAULT_LIMIT = 128 << 20  # WebGPU's default maxStorageBufferBindingSize
# The KV cache's precision (kernels.KV_TYPES). F16 (two per u32) halves the bytes attention reads
# a token and keeps transformers' greedy ids up to the first near-tie (tests/test_gpu_backend.py);
# it moves the real model's logits by up to 1.4e-2 against NumPy's f32 cache (a random tiny
# model's by up to 4e-2). F32 gives NumPy's own values, which the parity rule asks of the
# default path (the real model within 1e-3 of NumPy's logits: test_commands.py's GPU run,
# test_plain_browser.py, test_why_browser.py's probabilities): F32 stays the default, F16 is
# one constant (or build_program's kv=) away.
KV_CACHE = "F32"
# A plan over NumPy's own float32 arrays (host.native_gpu.open_arrays: the backend contract's tests, held to
# NumPy at f32 precision) keeps NumPy's f32 cache.
KV_CACHE_OF_SOURCE = {"arrays": "F32"}


def build_program(plan: dict, n_ctx: int, features=(), limits: dict | None = None, chunk: int = CHUNK,
                  kv: str | None = None, gemm: str | None = None) -> dict:
    """gemm: the prefill GEMM (kernels.GEMMS; default kernels.GEMM)."""
    kv = kv or KV_CACHE_OF_SOURCE.get(plan.get("source"), KV_CACHE)
    if kv not in K.KV_TYPES:
        raise ChatlensError(f"a KV cache in {kv}: the GPU holds one in {' or '.join(K.KV_TYPES)}")
    if gemm is not None and gemm not in K.GEMMS:
        raise ChatlensError(f"no prefill GEMM named {gemm!r}: the GPU has {' and '.join(K.GEMMS)}")
    cfg = ModelConfig(**plan["config"])
    if not 0 < n_ctx <= cfg.n_ctx:
        raise ChatlensError(f"a context of {n_ctx} tokens does not fit the model's {cfg.n_ctx}")
    target = Target.for_features(features)
    b = ProgramBuilder()
    tensors = _checked_tensors(plan, cfg)
    hd, nh, nkv, dim, ffn, vocab = cfg.head_dim, cfg.n_heads, cfg.n_kv_heads, cfg.dim, cfg.ffn_dim, cfg.vocab_size
    qd, kvd = nh * hd, nkv * hd
    splits, split_max = K.attention_splits(n_ctx, nh // nkv, SPLIT_MIN)
    short = K.SHORT_KEYS if splits > 1 else None  # keys the *_short sequences serve
    hf_pairs = plan["rope"] == "hf"

    def matrix(buffer, names):
        """A buffer holding the named tensors back to back (16-byte aligned): one dispatch reads them
        all. Quantized blocks are regrouped as they are uploaded (kernels.LAYOUTS)."""
        dtype = tensors[names[0]]["dtype"]
        fill, segs, at = [], [], 0
        for name in names:
            nbytes, layout = K.stored(dtype, tensors[name]["nbytes"])
            fill.append((name, at, layout))
            segs.append(at // K.STORE_BYTES[dtype])
            at = align(at + nbytes)
        b.buffer(buffer, at, fill=fill)
        return Matrix(buffer, dtype, tensors[names[0]]["shape"][1], tuple(segs))

    def gain(buffer, name):
        b.buffer(buffer, tensors[name]["nbytes"], fill=[(name, 0)])
        return buffer, tensors[name]["dtype"]

    for name, t in tensors.items():
        b.weight(name, t)

    # activations, (T, width) for T up to the chunk; the KV cache, (n_kv, n_ctx, hd) per layer
    step = b.buffer("step", 4 * (len(STEP_FIELDS) + chunk + 2 * MAX_HIDDEN))
    b.buffer("x", 4 * chunk * dim)
    b.buffer("q", 4 * chunk * qd)
    b.buffer("attn", 4 * chunk * qd)
    if splits > 1:
        o_bytes, stats_bytes = K.partials_bytes(chunk, nh, splits, hd)
        b.buffer("partials", o_bytes)
        b.buffer("partial_stats", stats_bytes)
    b.buffer("h", 4 * chunk * ffn)
    b.buffer("logits", 4 * vocab)
    # a score run's: every row's logits (chunk, vocab): 25 MB for SmolLM2's chunk of 128 (a binding
    # holds 128 MiB), then each row's figures (chunk, 4)
    b.buffer("score_logits", 4 * chunk * vocab)
    b.buffer("score", K.score_bytes(chunk))
    b.buffer("chosen", 16)
    b.buffer("top_k_candidates", K.top_k_candidates_bytes(vocab, TOP_K_MAX))
    b.buffer("top_k", K.top_k_out_bytes(TOP_K_MAX))
    b.buffer("rope", 0, data=rope_table(cfg, n_ctx))
    # an inspection's: each block's output (layers, dim), their lens logits (layers, vocab) and
    # top-k scratch, and what is read back (lens top-k a layer, then attention (layers, nh, keys))
    b.buffer("lens_x", 4 * cfg.n_layers * dim)
    b.buffer("lens_logits", 4 * cfg.n_layers * vocab)
    b.buffer("lens_candidates", cfg.n_layers * K.top_k_candidates_bytes(vocab, TOP_K_MAX))
    attention_at = cfg.n_layers * K.top_k_out_bytes(TOP_K_MAX)
    b.buffer("inspection", attention_at + 4 * cfg.n_layers * nh * n_ctx)

    embed = matrix("embed", ["model.embed_tokens.weight"])
    lm_head = embed if cfg.tied_output else matrix("lm_head", ["lm_head.weight"])
    final_norm = gain("norm", "model.norm.weight")
    layers = []
    for i in range(cfg.n_layers):
        p, L = f"model.layers.{i}.", f"L{i}."
        qkv_names = [p + f"self_attn.{x}_proj.weight" for x in "qkv"]
        if len({tensors[n]["dtype"] for n in qkv_names}) == 1:
            qkv = [(matrix(L + "qkv", qkv_names), "qkv")]
        else:  # mixed precisions cannot share a decoder: one dispatch each
            qkv = [(matrix(L + x, [n]), x) for x, n in zip("qkv", qkv_names)]
        gate_up = [p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"]
        if tensors[gate_up[0]]["dtype"] != tensors[gate_up[1]]["dtype"]:
            raise ChatlensError(f"{gate_up[0]} and up_proj are stored in different precisions; the GPU fuses them")
        b.buffer(L + "k_cache", K.kv_cache_bytes(nkv, n_ctx, hd, kv))
        b.buffer(L + "v_cache", K.kv_cache_bytes(nkv, n_ctx, hd, kv))
        layers.append({
            "attn_norm": gain(L + "attn_norm", p + "input_layernorm.weight"), "qkv": qkv,
            "o": matrix(L + "o", [p + "self_attn.o_proj.weight"]),
            "mlp_norm": gain(L + "mlp_norm", p + "post_attention_layernorm.weight"),
            "gate_up": matrix(L + "gate_up", gate_up), "down": matrix(L + "down", [p + "mlp.down_proj.weight"]),
            "k_cache": L + "k_cache", "v_cache": L + "v_cache",
            "index": b.buffer(L + "index", 4, data=struct.pack("<I", i))})

    pairs = {"q": (0, qd // 2), "k": (qd // 2, (qd + kvd) // 2), "v": ((qd + kvd) // 2, (qd + 2 * kvd) // 2),
             "qkv": (0, (qd + 2 * kvd) // 2)}
    eps = cfg.norm_eps
    bodies = [("prefill", chunk, splits), ("decode", 1, splits), ("inspect", 1, splits),
              ("prefill_hidden", chunk, splits)]
    if short:
        bodies += [("prefill_short", chunk, 1), ("decode_short", 1, 1), ("inspect_short", 1, 1),
                   ("prefill_hidden_short", chunk, 1)]
    for seq, tokens, seq_splits in bodies:
        rows = None if tokens == 1 else chunk  # matvec for one token, matmul for a chunk
        inspecting = seq.startswith("inspect")
        hiding = seq.startswith("prefill_hidden")
        K.embed(b, seq, step=step, w=embed, x="x", chosen="chosen", chunk=tokens)  # ids (T) -> x (T, dim)
        for w in layers:
            for mat, part in w["qkv"]:
                segs = {"q": mat.segs[0], "k": mat.segs[1], "v": mat.segs[2]} if part == "qkv" else {part: 0}
                epi = K.rope_kv("q", w["k_cache"], w["v_cache"], "rope", n_heads=nh, n_kv_heads=nkv, head_dim=hd,
                                n_ctx=n_ctx, hf_pairs=hf_pairs, segs=segs, pairs=pairs[part], kv=kv)
                # rms_norm(x) (T, dim) -> q (T, nh*hd) rotated; k, v rotated -> cache[:, start:start+T]
                K.project(b, seq, target, step=step, x="x", w=mat, epilogue=epi, gain=w["attn_norm"], eps=eps, chunk=rows,
                          gemm=gemm)
            # q (T, nh*hd), cache (nkv, start+T, hd) -> attn (T, nh*hd) in one dispatch (one split);
            # else -> partials (T, nh, splits, hd) and stats (T, nh, splits, 2), merged into attn by a
            # pass of their own for a chunk, and for one token by the o projection below (x_merge).
            # prefill_hidden*: keys hidden_start..hidden_end-1 of the cache masked for every token
            merged_later = tokens == 1 and seq_splits > 1 and K.merges_in_matvec(nh, seq_splits)
            split = K.attention(b, seq, step=step, q="q", kc=w["k_cache"], vc=w["v_cache"], partials="partials",
                                stats="partial_stats", out=None if merged_later else "attn", n_heads=nh,
                                n_kv_heads=nkv, head_dim=hd, n_ctx=n_ctx, splits=seq_splits,
                                split_max=split_max if seq_splits > 1 else short or split_max, tokens=tokens,
                                kv=kv, target=target, hidden=hiding)
            if inspecting:
                # q (1, nh*hd), cache (nkv, start+1, hd) -> inspection's weights (layer, nh, start+1)
                K.attention_weights(b, seq, step=step, q="q", kc=w["k_cache"], vc=w["v_cache"], out="inspection",
                                    index=w["index"], at=attention_at // 4, n_heads=nh, n_kv_heads=nkv, head_dim=hd,
                                    n_ctx=n_ctx, kv=kv)
            # x (T, dim) += attn (T, nh*hd) @ o.T   (one token: attn merged from the partials as loaded)
            K.project(b, seq, target, step=step, x=split or "attn", w=w["o"], epilogue=K.residual("x", dim),
                      chunk=rows, gemm=gemm)
            # rms_norm(x) (T, dim) -> h (T, ffn) = silu(. @ gate.T) * (. @ up.T)
            K.project(b, seq, target, step=step, x="x", w=w["gate_up"], epilogue=K.silu_mul("h", ffn),
                      gain=w["mlp_norm"], eps=eps, chunk=rows, gemm=gemm)
            # x (T, dim) += h (T, ffn) @ down.T   (inspecting: and x (1, dim) -> lens_x[layer])
            down = K.residual_keep("x", dim, "lens_x", w["index"]) if inspecting else K.residual("x", dim)
            K.project(b, seq, target, step=step, x="h", w=w["down"], epilogue=down, chunk=rows, gemm=gemm)
    # rms_norm(x[T-1]) (dim) -> logits (vocab) -> chosen id
    K.project(b, "head", target, step=step, x="x", w=lm_head, epilogue=K.store("logits", vocab),
              gain=final_norm, eps=eps, last_row=True)
    K.argmax(b, "head", logits="logits", out="chosen", vocab=vocab)
    # logits (vocab) -> candidates (chunks, k_max + 1) -> top_k (k_max) of (id, logit), then (max, sum exp)
    K.top_k(b, "top_k", step=step, logits="logits", candidates="top_k_candidates", out="top_k", vocab=vocab,
            k_max=TOP_K_MAX)

    # rms_norm(x) (T, dim) -> score_logits (T, vocab), every row (the head's matvec reads only the last)
    K.project(b, "score", target, step=step, x="x", w=lm_head, epilogue=K.store("score_logits", vocab),
              gain=final_norm, eps=eps, chunk=chunk, gemm=gemm)
    # score_logits rows score_from..T-1 (vocab) -> score[r] = (target logit, max, sum exp, argmax id)
    K.score(b, "score", step=step, logits="score_logits", out="score", vocab=vocab, chunk=chunk)

    for w in layers:
        # rms_norm(lens_x[layer]) (dim) -> lens_logits[layer] (vocab), the head's matvec
        K.project(b, "lens", target, step=step, x="lens_x", w=lm_head, x_row=True, gain=final_norm, eps=eps,
                  epilogue=K.store_row("lens_logits", vocab, w["index"]))
    # lens_logits (layers, vocab) -> inspection[:attention_at]: per layer top_k (id, logit), then (max, sum exp)
    K.top_k(b, "lens", step=step, logits="lens_logits", candidates="lens_candidates", out="inspection", vocab=vocab,
            k_max=TOP_K_MAX, rows=cfg.n_layers)

    b.readback("id", "chosen", 0, 4)
    b.readback("top_k", "top_k")
    b.readback("logits", "logits", 0, 4 * vocab)
    b.readback("inspection", "inspection")
    b.readback("score", "score")
    _require(b, target, limits)
    b.meta = {"config": cfg.to_dict(), "n_ctx": n_ctx, "chunk": chunk, "vocab": vocab, "top_k_max": TOP_K_MAX,
              "splits": splits, "split_min": SPLIT_MIN, "split_max": split_max, "step_buffer": step,
              "short": {"keys": short, "prefill": "prefill_short", "decode": "decode_short",
                        "inspect": "inspect_short", "prefill_hidden": "prefill_hidden_short"} if short else None,
              "hidden": "prefill_hidden",
              "score": {"body": "prefill", "sequence": "score", "readback": "score", "row_bytes": 16},
              "inspect": {"body": "inspect", "lens": "lens", "readback": "inspection", "layers": cfg.n_layers,
                          "heads": nh, "top_k_max": TOP_K_MAX, "attention_at": attention_at},
              "kv": kv, "kv_value_bytes": K.KV_TYPES[kv]["bytes"], "gemm": gemm or K.GEMM,
              "step_fields": list(STEP_FIELDS), "rope": plan["rope"], "reduce": target.reduce,
              "dispatches": {name: len(seq) for name, seq in b.sequences.items()},
              "in_flight": IN_FLIGHT}
    return b.to_dict()


def step_params(meta: dict, start: int, tokens, use_argmax: bool = False, top_k: int = 0, hidden=None,
                score_from: int = 0, next_id: int = 0) -> bytes:
    """The step buffer's bytes for a chunk of `tokens` at position `start`; hidden = ((a, b), ...):
    the key ranges hidden from its queries (a *_hidden body), score_from and next_id: a score run's."""
    tokens = list(tokens)
    n_keys = start + len(tokens)
    split = max(meta["split_min"], math.ceil(n_keys / meta["splits"]))
    split = min(meta["split_max"], math.ceil(split / meta["split_min"]) * meta["split_min"])
    ranges = [tuple(r) for r in hidden or ()]
    hidden_start, hidden_end = (min(a for a, _ in ranges), max(b for _, b in ranges)) if ranges else (0, 0)
    fields = {"n_tokens": len(tokens), "start": start, "split": split, "use_argmax": int(use_argmax),
              "top_k": top_k, "hidden_start": hidden_start, "hidden_end": hidden_end, "score_from": score_from,
              "next_id": next_id, "n_hidden": len(ranges), "pad1": 0, "pad2": 0}
    words = [fields[f] for f in meta["step_fields"]] + tokens + [x for r in ranges for x in r]
    return struct.pack(f"<{len(words)}I", *words)


def rope_table(cfg: ModelConfig, n_ctx: int) -> bytes:
    """(n_ctx, hd/2) of (cos, sin) as model.rope_tables computes them in float32."""
    f32 = struct.Struct("<f")

    def r(x):
        return f32.unpack(f32.pack(x))[0]

    hd = cfg.head_dim
    base = r(cfg.rope_base)
    inv = [r(1.0 / r(base ** r(r(2 * i) / r(hd)))) for i in range(hd // 2)]
    out = bytearray()
    for pos in range(n_ctx):
        for f in inv:
            angle = r(pos * f)
            out += struct.pack("<ff", math.cos(angle), math.sin(angle))
    return bytes(out)


def _checked_tensors(plan: dict, cfg: ModelConfig) -> dict:
    """The plan's tensors, checked against the one tensor table (ModelConfig.tensors) as the NumPy
    path checks them: an unknown tensor is refused on both."""
    tensors = plan["tensors"]
    where = ", ".join(sorted({t["file"] for t in tensors.values()})) or "the model"
    cfg.check_tensors({name: t["shape"] for name, t in tensors.items()}, where)
    q_dim = cfg.n_heads * cfg.head_dim
    for dim in (cfg.dim, cfg.ffn_dim, q_dim, cfg.head_dim):
        if dim % 8:
            raise ChatlensError(f"the GPU kernels need model sizes that are multiples of 8, not {dim}")
    return {name: tensors[name] for name in cfg.tensors()}


def _require(b: ProgramBuilder, target: Target, limits: dict | None):
    """The features and limits the device must be created with; refuse what the adapter lacks."""
    largest = max(buf["size"] for buf in b.buffers.values())
    have = (limits or {}).get("maxStorageBufferBindingSize", DEFAULT_LIMIT)
    if largest > have:
        big = max(b.buffers.values(), key=lambda buf: buf["size"])
        raise ChatlensError(f"GPU buffer {big['name']} needs {largest} bytes; the adapter binds at most {have}")
    need = {"maxStorageBuffersPerShaderStage": 8, "maxComputeWorkgroupStorageSize": 16384,
            "maxComputeInvocationsPerWorkgroup": 256, "maxComputeWorkgroupSizeX": 256}
    if largest > DEFAULT_LIMIT:
        need["maxStorageBufferBindingSize"] = largest
        need["maxBufferSize"] = largest
    b.features = [target.feature] if target.feature else []
    b.limits = need

"""One function per GPU kernel: each assembles its WGSL module from the files in wgsl/, names
its bindings and constants, and appends its dispatch to a sequence of a ProgramBuilder. The
comment beside each dispatch in program.py gives its shapes.

Sizes come from the caller (ModelConfig); nothing here is specific to one model.
"""

import math
from dataclasses import dataclass, field

from .wgsl import f32, pow2_at_least

# Bytes of one element of W as its dequantize_<dtype>.wgsl declares it (WT): every load 16 bytes.
STORE_BYTES = {"F32": 16, "F16": 16, "BF16": 16, "Q8_0": 16, "Q4_0": 16, "Q4_1": 16}
# Elements per block of the quantized formats (a row is whole blocks).
BLOCK = {"F32": 1, "F16": 1, "BF16": 1, "Q8_0": 32, "Q4_0": 32, "Q4_1": 32}
# How quantized blocks are regrouped as they are uploaded (a fill's layout, builder.py), so that
# every load the decoder makes is aligned: blocks of `block` bytes, `group` at a time, each
# group stored as its blocks' scales, then their quants ([offset, size] fields of a block).
# Q8_0's 34-byte blocks and Q4_0's 18-byte ones are not 4-byte aligned as the file has them.
LAYOUTS = {"Q8_0": {"block": 34, "group": 8, "fields": [[0, 2], [2, 32]]},
           "Q4_0": {"block": 18, "group": 8, "fields": [[0, 2], [2, 16]]},
           "Q4_1": {"block": 20, "group": 4, "fields": [[0, 4], [4, 16]]}}
GAIN_TYPES = ("F32", "F16", "BF16")
UNIT = 8  # consecutive elements of a row the matmul and the embedding load at a time (w_unit)
# Elements of a row the matvec loads at a time (w_wide): one 16-byte load of W (two for F32),
# consecutive elements: a Q4 block's nibbles, half a Q8_0 block's quants, 8 f16/bf16 values.
WIDE = {"F32": 8, "F16": 8, "BF16": 8, "Q8_0": 16, "Q4_0": 32, "Q4_1": 32}
ROWS = 4  # virtual rows per matmul invocation (one vec4)
MATVEC_ROWS = 8  # virtual rows per matvec workgroup: each x unit loaded once serves all of them
# The prefill GEMMs' tiles: TM tokens x TN rows, K in steps of KT; each of the WG invocations
# computes 4 tokens x 4 rows and loads TM*KT/4/WG vec4 of x a step, the first TN*KT/8 of them a W
# unit: WG == (TM/4) * (TN/4). Their tiles fill 16 KiB, WebGPU's default workgroup storage.
# matmul.wgsl is double-buffered (two buffers of KT = 16, one barrier a step; it was 12-19% slower
# on lavapipe), matmul_plain.wgsl single-buffered (one of KT = 32, two barriers a step): a real GPU
# decides (scripts/device_bench.py --gemm runs both). GEMM is the one programs use.
# matmul_small is matmul_plain.wgsl with 16 x 16 tiles 8 deep (`file`: the WGSL it takes, when
# not its name; its WG == TN * KT / 8 and TM == 2 * KT): on a CPU emulation of a GPU compiling
# dominates a model's setup, most of it the four GEMMs, and these compiled fastest of the tiles
# tried (Chromium's SwiftShader, the tiny test model, this machine idle: the pipelines and upload
# 10 s with matmul's tiles, 6.0-6.5 s with matmul's 32 x 32 x 16, 4.1-4.3 s with its 32 x 32 x 8;
# the four GEMMs alone 1.6-2.8 s with the last, 0.5 s with these). The real model's executor there
# (its file fetched from a local server, uploaded, its pipelines compiled) is ready in 3.4-3.6 s
# against 4.4-4.6 s with matmul's 32 x 32 x 8, and reads a 42-token prompt in 11.5-11.9 s against
# 13.1-13.7 s (two runs each, alternated). EMULATED_GEMM is the one programs use there
# (chatlens.device.emulated).
GEMMS = {"matmul": {"TM": 64, "TN": 64, "KT": 16, "WG": 256},
         "matmul_plain": {"TM": 64, "TN": 64, "KT": 32, "WG": 256},
         "matmul_small": {"file": "matmul_plain", "TM": 16, "TN": 16, "KT": 8, "WG": 16}}
GEMM = "matmul"
EMULATED_GEMM = "matmul_small"
MAX_GRID = 65535


@dataclass(frozen=True)
class Target:
    """How kernels are compiled for one adapter: the reduction variant and WGSL enables."""
    subgroups: bool = False
    enable: tuple = ()  # Chromium's WGSL wants `enable subgroups;`, wgpu's naga refuses it

    @classmethod
    def for_features(cls, features) -> "Target":
        features = set(features)
        if "subgroups" in features:  # the WebGPU name
            return cls(True, ("subgroups",))
        if "subgroup" in features:  # wgpu-native's name for the same feature
            return cls(True, ())
        return cls(False, ())

    @property
    def feature(self):
        """The feature the device must be asked for, in the host's own spelling."""
        if not self.subgroups:
            return None
        return "subgroups" if self.enable else "subgroup"

    @property
    def reduce(self) -> str:
        return "reduce_subgroup" if self.subgroups else "reduce_shared"


@dataclass(frozen=True)
class Matrix:
    """Weights in a GPU buffer as the source stores them: one or more (out, k) tensors of one
    dtype, the i-th starting at storage element segs[i] (SEG0, SEG1, ...)."""
    buffer: str
    dtype: str
    k: int
    segs: tuple = (0,)

    @property
    def units(self) -> int:
        return self.k // UNIT


@dataclass(frozen=True)
class Epilogue:
    """What a projection does with its virtual rows (wgsl/<file>.wgsl)."""
    file: str
    nv: int
    bindings: tuple
    consts: dict = field(default_factory=dict)
    needs: tuple = ()  # files it calls into, before its own


# Most splits' weights (query heads x splits) a matvec merging split attention holds in shared
# memory (x_merge.wgsl): 4 KiB, beside the matvec's own reduction (at most 9 KiB). SmolLM2 at its
# whole context takes 9 x 32; a program past this merges in a pass of its own (merges_in_matvec).
MERGE_MAX = 1024


def merges_in_matvec(n_heads: int, splits: int) -> bool:
    """Whether the matvec after split attention can merge its partials as it loads them."""
    return n_heads * splits <= MERGE_MAX


@dataclass(frozen=True)
class Partials:
    """Split attention's output before its merge (attention_split.wgsl): for each token, query
    head and split of the keys, the exp-weighted sum of values (`o`: T, NH, SPLITS, HD) and the
    split's max score and sum of exp(score - max) (`stats`: T, NH, SPLITS, 2). A matvec given them
    as its x merges them as it loads x (x_merge.wgsl), so the merge takes no dispatch of its own."""
    o: str
    stats: str
    n_heads: int
    head_dim: int
    splits: int


def stored(dtype: str, nbytes: int) -> tuple[int, dict | None]:
    """(bytes on the GPU, layout) of a tensor of `nbytes` bytes in the file: a regrouped one's
    last group is padded with zero blocks."""
    layout = LAYOUTS.get(dtype)
    if layout is None:
        return nbytes, None
    group_bytes = layout["block"] * layout["group"]
    return -(-nbytes // group_bytes) * group_bytes, layout


def check_row(dtype: str, k: int, what: str):
    if dtype not in STORE_BYTES:
        raise ValueError(f"{what}: no GPU kernel decodes {dtype}")
    need = max(UNIT, BLOCK[dtype])
    if k % need:
        raise ValueError(f"{what}: rows of {k} {dtype} elements; the GPU kernels need a multiple of {need}")


def matvec_workgroup(units: int) -> int:
    """Invocations per matvec workgroup for rows of `units` wide units: the multiple of 32 up to
    256 that leaves the fewest idle (the larger on a tie, fewer loop trips). Q4_1 at K=576 (18
    blocks) gives 32, BF16 at K=1536 (192 units) 192. Every invocation takes all the workgroup's
    rows: splitting them over groups of invocations instead, to fill short rows' idle lanes,
    loads each x unit once per group and ran 2x slower on lavapipe (scripts/kernel_times.py)."""
    return max(range(32, 257, 32), key=lambda wg: (units / (math.ceil(units / wg) * wg), wg))


# --- epilogues ---------------------------------------------------------------------------

def store(y: str, nv: int) -> Epilogue:
    """Y = x @ W.T"""
    return Epilogue("store", nv, (("Y", "array<f32>", "read_write", y),))


def residual(stream: str, nv: int) -> Epilogue:
    """stream = stream + x @ W.T"""
    return Epilogue("residual", nv, (("R", "array<f32>", "read_write", stream),))


def residual_keep(stream: str, nv: int, keep: str, index: str) -> Epilogue:
    """stream = stream + x @ W.T, and the new stream copied into row index[0] of keep (layers, nv):
    a block's output as an inspection keeps it (the inspect sequences' down projection)."""
    return Epilogue("residual_keep", nv, (("R", "array<f32>", "read_write", stream),
                                          ("KEEP", "array<f32>", "read_write", keep), ("LAYER", "array<u32>", "read", index)))


def store_row(y: str, nv: int, index: str) -> Epilogue:
    """Y[index[0]] = x @ W.T, Y (layers, nv): one block's logit-lens logits."""
    return Epilogue("store_row", nv, (("Y", "array<f32>", "read_write", y), ("LAYER", "array<u32>", "read", index)))


def silu_mul(h: str, ffn: int) -> Epilogue:
    """h = silu(x @ gate.T) * (x @ up.T); gate at SEG0, up at SEG1 of the matrix."""
    return Epilogue("silu", 2 * ffn, (("H", "array<f32>", "read_write", h),))


def rope_kv(q: str, kc: str, vc: str, table: str, *, n_heads, n_kv_heads, head_dim, n_ctx, hf_pairs: bool,
            segs: dict, pairs: tuple, kv: str = "F16") -> Epilogue:
    """q, k rotated and k, v into the cache (kv_cache_bytes, in `kv`: KV_TYPES); pairs = (first,
    end) pair of q|k|v this dispatch does; segs: where q, k and v start in its matrix (storage
    elements; absent ones unused)."""
    first, end = pairs
    consts = {"HD": head_dim, "NH": n_heads, "NKV": n_kv_heads, "N_CTX": n_ctx, "ROPE_HF": hf_pairs,
              "SEG_Q": segs.get("q", 0), "SEG_K": segs.get("k", 0), "SEG_V": segs.get("v", 0), "PAIR_BASE": first}
    pair = KV_TYPES[kv]["pair"]
    bindings = (("Q", "array<f32>", "read_write", q), ("KC", f"array<{pair}>", "read_write", kc),
                ("VC", f"array<{pair}>", "read_write", vc), ("ROPE", "array<vec2<f32>>", "read", table))
    return Epilogue("rope", 2 * (end - first), bindings, consts, (f"kv_store_{kv.lower()}",))


# --- kernels -----------------------------------------------------------------------------

def step_binding(step: str):
    return ("step", "Step", "read", step)


def project(b, sequence: str, target: Target, *, step: str, x: "str | Partials", w: Matrix, epilogue: Epilogue,
            gain: tuple | None = None, eps: float = 0.0, chunk: int | None = None, last_row: bool = False,
            gemm: str | None = None, x_row: bool = False):
    """x @ W.T with an epilogue: matvec (one token) when chunk is None, else a tiled matmul over
    up to `chunk` tokens (gemm: one of GEMMS, default GEMM). gain = (buffer, dtype) folds
    model.rms_norm(x, gain, eps) in first. x is a buffer (T, K), or for the matvec split
    attention's Partials, merged as they are loaded (K = NH * HD). x_row: the matvec reads row
    LAYER[0] of x (x_row.wgsl), LAYER bound by the epilogue (store_row): the logit lens."""
    check_row(w.dtype, w.k, w.buffer)
    nv = epilogue.nv
    merged = isinstance(x, Partials)
    if x_row and (merged or chunk is not None or last_row or "LAYER" not in [n for n, *_ in epilogue.bindings]):
        raise ValueError("x_row: a plain matvec whose epilogue binds LAYER (store_row)")
    if merged:
        if chunk is not None or gain is not None or last_row:
            raise ValueError("only a plain matvec merges split attention as it loads x")
        if not merges_in_matvec(x.n_heads, x.splits):
            raise ValueError(f"{x.n_heads} heads x {x.splits} splits: more split weights than a matvec holds")
        if x.n_heads * x.head_dim != w.k:
            raise ValueError(f"{w.buffer}: rows of {w.k} elements cannot take {x.n_heads} heads of {x.head_dim}")
        x_bindings = [("P", "array<vec4<f32>>", "read", x.o), ("S", "array<vec2<f32>>", "read", x.stats)]
    else:
        x_bindings = [("X", "array<vec4<f32>>", "read", x)]
    bindings = [step_binding(step), *x_bindings, ("W", "array<WT>", "read", w.buffer)]
    files = ["step", f"dequantize_{w.dtype.lower()}"]
    if gain is not None:
        if gain[1] not in GAIN_TYPES:
            raise ValueError(f"{gain[0]}: an RMSNorm weight in {gain[1]} has no GPU kernel")
        bindings.append(("G", "array<GT>", "read", gain[0]))
        files += ["rms_norm", f"gain_{gain[1].lower()}"]
    else:
        files.append("no_norm")
    bindings += epilogue.bindings
    files += [*epilogue.needs, epilogue.file]
    rows = ROWS if chunk else MATVEC_ROWS
    consts = {"K": w.k, "UNITS": w.units, "WIDE": WIDE[w.dtype], "NV": nv, "NORM": gain is not None, "EPS": eps,
              "ROWS": rows}
    consts.update({f"SEG{i}": s for i, s in enumerate(w.segs)})
    consts.update(epilogue.consts)
    if chunk is None:
        wide_units = w.k // WIDE[w.dtype]
        wg = matvec_workgroup(wide_units)
        groups = math.ceil(nv / rows)
        gx = min(groups, MAX_GRID)
        consts.update({"WIDE_UNITS": wide_units, "WG": wg,
                       "WG_POW2": pow2_at_least(wg), "NRED": rows + (gain is not None), "LAST_ROW": last_row,
                       "GRID_X": gx})
        if merged:
            consts.update({"NH": x.n_heads, "HD": x.head_dim, "SPLITS": x.splits})
        files += ["x_merge" if merged else "x_row" if x_row else "x_direct", target.reduce, "matvec"]
        grid = (gx, math.ceil(groups / gx), 1)
        label = f"matvec-{'merge-' if merged else ''}{epilogue.file}-{w.dtype}"
        enable = target.enable
    else:
        gemm = gemm or GEMM
        if gemm not in GEMMS:
            raise ValueError(f"no prefill GEMM named {gemm!r}: {', '.join(GEMMS)}")
        tiles = dict(GEMMS[gemm])
        files.append(tiles.pop("file", gemm))
        consts.update(tiles)
        grid = (math.ceil(nv / tiles["TN"]), math.ceil(chunk / tiles["TM"]), 1)
        if grid[0] > MAX_GRID:
            raise ValueError(f"{w.buffer}: {nv} rows need more than {MAX_GRID} matmul tiles")
        label = f"{gemm}-{epilogue.file}-{w.dtype}"
        enable = ()
    b.kernel(sequence, label, bindings, consts, files, grid, enable=enable)


def embed(b, sequence: str, *, step: str, w: Matrix, x: str, chosen: str, chunk: int):
    """x[t] = embed[ids[t]] for up to `chunk` tokens (ids from the step, or the last argmax)."""
    check_row(w.dtype, w.k, w.buffer)
    wg = 64
    bindings = [step_binding(step), ("W", "array<WT>", "read", w.buffer), ("OUT", "array<u32>", "read", chosen),
                ("X", "array<vec4<f32>>", "read_write", x)]
    files = ["step", f"dequantize_{w.dtype.lower()}", "embed"]
    consts = {"K": w.k, "UNITS": w.units, "WIDE": WIDE[w.dtype], "SEG0": w.segs[0], "WG": wg}
    b.kernel(sequence, f"embed-{w.dtype}", bindings, consts, files, (math.ceil(w.units / wg), chunk, 1))


SHORT_KEYS = 128  # a context up to this many keys is one workgroup's: attention writes its output directly
ATTENTION_BLOCK = 256  # keys whose scores attention holds in shared memory at once


def attention_splits(n_ctx: int, group: int, split_min: int = 32, max_splits: int = 32) -> tuple[int, int]:
    """(splits, split_max): the grid's key splits and the most keys one split may take, so that
    splits * split_max covers n_ctx. One split (direct output, no merge) up to SHORT_KEYS; past
    it at least as many splits as keep a split's keys to what GROUP * 2048 f32 hold (the grid
    grows with the context)."""
    if n_ctx <= SHORT_KEYS:
        return 1, math.ceil(n_ctx / split_min) * split_min
    split_cap = max(split_min, (2048 // group) // split_min * split_min)
    splits = max(min(max_splits, math.ceil(n_ctx / split_min)), math.ceil(n_ctx / split_cap))
    split_max = math.ceil(math.ceil(n_ctx / splits) / split_min) * split_min
    return splits, split_max


def attention_block(group: int, split_max: int) -> int:
    """Keys a block of attention.wgsl takes: its scores (GROUP * BLOCK f32) within 8 KiB."""
    return max(32, min(ATTENTION_BLOCK, split_max, (2048 // group) // 32 * 32))


# The KV cache's precisions: F16 (two per u32, half the bytes; the default) or F32 (NumPy's).
# pair: the WGSL type of a pair of dims (2i, 2i + 1); key8: of 8 dims; bytes: of one value.
KV_TYPES = {"F16": {"pair": "u32", "key8": "vec4<u32>", "bytes": 2},
            "F32": {"pair": "vec2<f32>", "key8": "vec4<f32>", "bytes": 4}}


def kv_cache_bytes(n_kv_heads: int, n_ctx: int, head_dim: int, kv: str = "F16") -> int:
    """One layer's K (or V) cache: (n_kv, n_ctx, hd) in `kv`."""
    return KV_TYPES[kv]["bytes"] * n_kv_heads * n_ctx * head_dim


def attention(b, sequence: str, *, step: str, q: str, kc: str, vc: str, partials: str | None, stats: str | None,
              out: str | None, n_heads: int, n_kv_heads: int, head_dim: int, n_ctx: int, splits: int, split_max: int,
              tokens: int, kv: str = "F16", target: Target = Target(), hidden: bool = False) -> "Partials | None":
    """softmax(q k^T / sqrt(hd)) v over the cache (in `kv`), causal; tokens: the grid's tokens (1
    for decode, the chunk for prefill). With one split it is written to `out` directly (one
    dispatch). Else each split's partials go to `partials` (T, NH, SPLITS, HD) and `stats` (T, NH,
    SPLITS, 2), then a merge pass writes `out`; with out None there is no merge pass: the
    Partials returned are the x of the matvec that follows, which merges them as it loads them
    (project). Its reductions use subgroups where the target has them. hidden: keys
    step.hidden_start..hidden_end-1 masked for every token (a pipeline of its own: HIDDEN)."""
    wg = 32  # a split's 32 keys, one a thread (lavapipe: a prefill chunk's attention 1.5x faster than with 64)
    group = n_heads // n_kv_heads
    common = {"HD": head_dim, "NH": n_heads, "SPLITS": splits}
    consts = {**common, "GROUP": group, "N_CTX": n_ctx, "BLOCK": attention_block(group, split_max), "WG": wg,
              "WG_POW2": pow2_at_least(wg), "SCALE": f32(1.0 / math.sqrt(head_dim)), "HIDDEN": hidden}
    t = KV_TYPES[kv]
    bindings = [step_binding(step), ("Q", "array<vec4<f32>>", "read", q), ("KC", f"array<{t['key8']}>", "read", kc),
                ("VC", f"array<{t['pair']}>", "read", vc)]
    files = ["step", f"kv_load_{kv.lower()}", "attention_reduce_" + ("subgroup" if target.subgroups else "shared")]
    label = "attention-hidden" if hidden else "attention"
    if splits == 1:
        b.kernel(sequence, f"{label}-direct", bindings + [("A", "array<f32>", "read_write", out)], consts,
                 files + ["attention_direct", "attention"], (1, n_kv_heads, tokens), enable=target.enable)
        return None
    b.kernel(sequence, label, bindings + [("P", "array<vec2<f32>>", "read_write", partials),
                                          ("S", "array<vec2<f32>>", "read_write", stats)], consts,
             files + ["attention_split", "attention"], (splits, n_kv_heads, tokens), enable=target.enable)
    split = Partials(partials, stats, n_heads, head_dim, splits)
    if out is None:
        return split
    bindings = [step_binding(step), ("P", "array<f32>", "read", partials), ("S", "array<vec2<f32>>", "read", stats),
                ("A", "array<f32>", "read_write", out)]
    b.kernel(sequence, "attention_merge", bindings, {**common, "WG": wg}, ["step", "attention_merge"],
             (n_heads, tokens, 1))
    return None


def partials_bytes(tokens: int, n_heads: int, splits: int, head_dim: int) -> tuple[int, int]:
    """Bytes of split attention's partials (T, NH, SPLITS, HD) and of its stats (T, NH, SPLITS, 2), f32."""
    return 4 * tokens * n_heads * splits * head_dim, 8 * tokens * n_heads * splits


def attention_weights(b, sequence: str, *, step: str, q: str, kc: str, vc: str, out: str, index: str, at: int,
                      n_heads: int, n_kv_heads: int, head_dim: int, n_ctx: int, kv: str = "F16"):
    """One token's softmax weights over the cache, each query head's (model.attention's probs), into
    out[at + (index[0] * n_heads + head) * n_keys + key] (f32, n_keys = step.start + 1): what an
    inspection shows of layer index[0]. It reads what the token's q/k/v projection wrote."""
    wg = 64
    t = KV_TYPES[kv]
    consts = {"HD": head_dim, "NH": n_heads, "GROUP": n_heads // n_kv_heads, "N_CTX": n_ctx, "WG": wg,
              "WG_POW2": pow2_at_least(wg), "SCALE": f32(1.0 / math.sqrt(head_dim)), "AT": at}
    bindings = [step_binding(step), ("Q", "array<vec4<f32>>", "read", q), ("KC", f"array<{t['key8']}>", "read", kc),
                ("VC", f"array<{t['pair']}>", "read", vc), ("LAYER", "array<u32>", "read", index),
                ("AW", "array<f32>", "read_write", out)]
    b.kernel(sequence, "attention-weights", bindings, consts, ["step", f"kv_load_{kv.lower()}", "attention_weights"],
             (n_heads, 1, 1))


def argmax(b, sequence: str, *, logits: str, out: str, vocab: int):
    wg = 256
    bindings = [("LOGITS", "array<f32>", "read", logits), ("OUT", "array<u32>", "read_write", out)]
    b.kernel(sequence, "argmax", bindings, {"V": vocab, "WG": wg, "WG_POW2": wg}, ["argmax"], (1, 1, 1))


def score(b, sequence: str, *, step: str, logits: str, out: str, vocab: int, chunk: int):
    """out[r] (score_bytes) <- (target logit, max, sum of exp(logit - max), argmax id) of row r of
    logits (chunk, vocab) for the rows step.score_from..n_tokens-1: NumpyBackend.score's
    figures of each scored row (score.wgsl). One workgroup a row."""
    wg = 256
    bindings = [step_binding(step), ("LOGITS", "array<f32>", "read", logits),
                ("OUT", "array<vec4<u32>>", "read_write", out)]
    b.kernel(sequence, "score", bindings, {"V": vocab, "WG": wg, "WG_POW2": wg}, ["step", "score"], (chunk, 1, 1))


def score_bytes(chunk: int) -> int:
    """A row's (target logit, max, sum of exp, argmax id) for each row of a chunk, 4 words each."""
    return 16 * chunk


TOPK_CHUNK = 1024


def top_k(b, sequence: str, *, step: str, logits: str, candidates: str, out: str, vocab: int, k_max: int,
          rows: int = 1):
    """out (top_k_out_bytes) <- the step.top_k best (id, logit) of logits, then (max, sum of
    exp(logit - max)) over the whole vocabulary; candidates (top_k_candidates_bytes) is scratch.
    rows > 1: logits (rows, vocab), each row found on its own into out and candidates, `rows`
    times their one-row sizes, one after another (the logit lens: a row a layer)."""
    wg = 256
    n_chunks = math.ceil(vocab / TOPK_CHUNK)
    consts = {"V": vocab, "WG": wg, "WG_POW2": wg, "CHUNK": TOPK_CHUNK, "K_MAX": k_max, "N_CHUNKS": n_chunks}
    # both entry points live in one module, so both see every binding
    bindings = [step_binding(step), ("LOGITS", "array<f32>", "read", logits),
                ("CAND", "array<vec2<u32>>", "read_write", candidates), ("OUT", "array<vec2<u32>>", "read_write", out)]
    b.kernel(sequence, "top_k", bindings, consts, ["step", "top_k"], (n_chunks, rows, 1), entry="chunks")
    b.kernel(sequence, "top_k", bindings, consts, ["step", "top_k"], (rows, 1, 1), entry="merge")


def top_k_candidates_bytes(vocab: int, k_max: int) -> int:
    """Each chunk's k_max candidates, then each chunk's (max, sum of exp) pair."""
    return math.ceil(vocab / TOPK_CHUNK) * (k_max + 1) * 8


def top_k_out_bytes(k_max: int) -> int:
    """k_max (id, logit) pairs, then the vocabulary's (max, sum of exp(logit - max))."""
    return (k_max + 1) * 8

"""The known-answer check: before a GPU computes anything a learner reads, the GPU program runs a
small fixed model whose answers CPython computed beforehand, and must agree with them.

Why: a GPU can report itself fine and compute wrong values (llama.cpp's wasm port met an ANGLE
adapter that did, with no feature to tell it apart: yzma#359; docs/compute.md). So the page trusts an
adapter only once this check passed on it, and keeps the result per adapter and build.

The check model (CONFIG): the real model's shapes where the kernels' shapes matter (hidden 576,
9 query heads over 3 KV heads of 64, MLP 1536, the page's context of 1,024 keys, so attention
splits past 128 keys as the page's program does), 2 layers and a vocabulary of 1,100 (two of
top_k's 1,024-id chunks, the last partial). Its weights are made, not shipped: element i of
tensor t is n * 2**-EXPONENT[role] with n = (fmix32(i ^ key(t)) >> 28) - 8, an integer in
-8..7 (a norm's gain: 1 + n / 32), so every format the kernels decode holds them exactly, and
the tensors are stored in all six (DTYPES: each decoder runs in a matvec and in a GEMM), the
norms in all three gain formats. site/js/gpu/checkmodel.mjs makes the same bytes in the browser
(tests/test_check.py holds the two equal). The rotary pairs are Hugging Face's (the page's own
sources); a GGUF's pairing is checked where its weights are (the weights check below).

The script (`OPS`): nine runs that between them dispatch every sequence the program has (a
reply's prefill and decode in their short and split forms, the head, top-k, an inspection's
inspect and lens, a cause's hidden-keys prefill and score), each compared figure by figure
with NumpyBackend's answers for the same calls: logits, normalizers, the best ids, attention
weights, each layer's logit lens and a scored row's figures. An id must be the reference's
unless the reference's own figures are within TOLERANCE of a tie.

    spec() -> dict                          the weights to make: each tensor's dtype, shape, key and scale
    plan_of(program) -> list[Run]           the script's runs over a program built for the check model
    compare(reference, meta, runs, raws)    -> CheckResult: each run's figures against the reference
    weights_entry(reference, top_k, log_z)  -> Checked: a real model's first step against its reference

The reference (chatlens.host.check.reference, NumpyBackend) is written by `python -m chatlens
build` into check.json beside build.json; chatlens.host.check runs the same check natively
(`python -m chatlens check`). The browser's side of it: site/js/worker/check.mjs (run, keep,
refuse), site/js/page/check.mjs (kept results). Pure Python but for values(), tensor_bytes() and
weights() (NumPy, the host's): Pyodide plans and compares.
"""

import base64
import hashlib
import json
import math
import struct
from dataclasses import dataclass, field

from . import defaults
from .config import ModelConfig
from .contract import doc
from .errors import ChatlensError

SEED = 49
# Prompt ids a run of the check's program takes at most (program.CHUNK is 128). The kernels' code
# does not depend on it, only their grids do: with 32, the emulated GEMM's tiles (16 tokens) run
# two rows of tiles, as the model's program's do, and a CPU emulation of a GPU (whose every
# workgroup costs, those past a chunk's tokens too) runs the script in a fraction of the time.
CHUNK = 32
# The page's program holds its largest window; the check's is built for the same context, so its
# attention takes the same splits (and compiles from the same text where the dtypes agree).
N_CTX = max(defaults.WINDOWS)
CONFIG = ModelConfig(n_layers=2, dim=576, n_heads=9, n_kv_heads=3, head_dim=64, ffn_dim=1536, vocab_size=1100,
                     n_ctx=N_CTX, rope_base=100000.0, norm_eps=1e-5, tied_output=True)
# Absolute, on logits (a few units here), normalizers, attention weights and scored figures:
# docs/fidelity.md's bound for the GPU against NumPy on the real model's logits. Honest engines
# stay far inside it (lavapipe, SwiftShader and Firefox's adapter here: within 2e-5); the
# documented fault (chatlens.gpu.fault) lands far outside (4e-3 to 1.3e-2, each run).
TOLERANCE = 1e-3
TOP_K = 8  # candidates the top-k and logit-lens figures list
DTYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1")
# Which format each of the check model's tensors is stored in: every decoder (DTYPES) under a
# matvec and a GEMM, every gain format under RMSNorm. q, k and v share one (the GPU fuses them),
# gate and up too. The embedding is also the output projection (tied), in the page's BF16.
LAYER_DTYPES = ({"qkv": "BF16", "o": "F32", "gate_up": "Q4_1", "down": "Q8_0", "attn_norm": "F32", "mlp_norm": "BF16"},
                {"qkv": "Q4_1", "o": "Q4_0", "gate_up": "BF16", "down": "F16", "attn_norm": "F16", "mlp_norm": "F32"})
EMBED_DTYPE, NORM_DTYPE = "BF16", "BF16"
# 2**-EXPONENT scales a matrix's integers to about 1/sqrt(its rows' length), so activations
# stay near 1 and attention is neither flat nor one-hot.
EXPONENT = {"embed_tokens": 5, "q_proj": 7, "k_proj": 7, "v_proj": 7, "o_proj": 7, "gate_proj": 7, "up_proj": 7,
            "down_proj": 8}
GAIN_STEP = 32  # a gain is 1 + n / GAIN_STEP
BLOCK_BYTES = {"Q8_0": 34, "Q4_0": 18, "Q4_1": 20}  # bytes of a block of 32
ELEMENT_BYTES = {"F32": 4, "F16": 2, "BF16": 2}
FORMAT = "chatlens-gpu-check"


def fmix32(x: int) -> int:
    """MurmurHash3's 32-bit finalizer: a bijection of u32 that mixes every bit."""
    x &= 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & 0xFFFFFFFF
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & 0xFFFFFFFF
    return x ^ (x >> 16)


def tensor_key(index: int) -> int:
    """The key of the check model's index-th tensor (ModelConfig.tensors' order)."""
    return fmix32(SEED * 0x9E3779B9 + index)


def integer(key: int, i: int) -> int:
    """Element i's integer in -8..7: the top 4 bits of fmix32(i ^ key)."""
    return (fmix32(i ^ key) >> 28) - 8


def _dtype_of(name: str) -> str:
    if name == "model.embed_tokens.weight":
        return EMBED_DTYPE
    if name == "model.norm.weight":
        return NORM_DTYPE
    layer = LAYER_DTYPES[int(name.split(".")[2])]
    part = name.split(".")[-2]
    if part in ("input_layernorm", "post_attention_layernorm"):
        return layer["attn_norm" if part == "input_layernorm" else "mlp_norm"]
    return layer[{"q_proj": "qkv", "k_proj": "qkv", "v_proj": "qkv", "o_proj": "o", "gate_proj": "gate_up",
                  "up_proj": "gate_up", "down_proj": "down"}[part]]


def nbytes_of(dtype: str, n: int) -> int:
    if dtype in BLOCK_BYTES:
        return n // 32 * BLOCK_BYTES[dtype]
    return n * ELEMENT_BYTES[dtype]


def spec() -> dict:
    """What the check model's weights are, for whoever makes their bytes (tensor_bytes here,
    checkmodel.mjs in the browser): {seed, gain_step, tensors: {name: {key, dtype, shape, gain,
    exponent, nbytes}}}. A gain is 1 + n / gain_step; a matrix's element n * 2**-exponent."""
    tensors = {}
    for index, (name, shape) in enumerate(CONFIG.tensors().items()):
        dtype = _dtype_of(name)
        gain = len(shape) == 1
        n = math.prod(shape)
        tensors[name] = {"key": tensor_key(index), "dtype": dtype, "shape": list(shape), "gain": gain,
                         "exponent": None if gain else EXPONENT[name.split(".")[-2]], "nbytes": nbytes_of(dtype, n)}
    return {"seed": SEED, "gain_step": GAIN_STEP, "tensors": tensors}


def plan() -> dict:
    """The check model as a weight plan (chatlens.gpu.weights): each tensor a "file" of its own,
    whose bytes tensor_bytes (or the browser's checkmodel.mjs) makes."""
    tensors = {name: {"file": name, "offset": 0, "nbytes": t["nbytes"], "dtype": t["dtype"], "shape": t["shape"]}
               for name, t in spec()["tensors"].items()}
    return {"source": "check", "rope": "hf", "config": CONFIG.to_dict(), "tensors": tensors}


# -- the weights, in NumPy (the host: the reference and the native check) -------------------------

def values(entry: dict):
    """A tensor's float32 values (its shape), from its spec entry."""
    import numpy as np

    n = math.prod(entry["shape"])
    i = np.arange(n, dtype=np.uint32) ^ np.uint32(entry["key"])
    x = i ^ (i >> np.uint32(16))
    x = x * np.uint32(0x85EBCA6B)
    x ^= x >> np.uint32(13)
    x = x * np.uint32(0xC2B2AE35)
    x ^= x >> np.uint32(16)
    ints = (x >> np.uint32(28)).astype(np.int32) - 8
    if entry["gain"]:
        out = 1 + ints.astype(np.float32) / np.float32(GAIN_STEP)
    else:
        out = ints.astype(np.float32) * np.float32(2.0 ** -entry["exponent"])
    return out.reshape(entry["shape"])


def tensor_bytes(entry: dict) -> bytes:
    """A tensor's bytes as its dtype stores them (the GGUF block layouts for Q8_0, Q4_0, Q4_1:
    each block's f16 scale (and Q4_1's f16 minimum), then its quants; elements 0..15 of a Q4
    block in the low nibbles, 16..31 in the high). Every value is exact in every format."""
    import numpy as np

    dtype = entry["dtype"]
    w = values(entry).reshape(-1)
    if dtype == "F32":
        return w.astype("<f4").tobytes()
    if dtype == "F16":
        return w.astype("<f2").tobytes()
    if dtype == "BF16":
        return (w.view(np.uint32) >> 16).astype("<u2").tobytes()
    ints = np.rint(w * np.float32(2.0 ** entry["exponent"])).astype(np.int32).reshape(-1, 32)  # the n of each element
    scale = np.full((ints.shape[0], 1), 2.0 ** -entry["exponent"], "<f2").view(np.uint8)  # (blocks, 2)
    if dtype == "Q8_0":
        return np.concatenate([scale, ints.astype(np.int8).view(np.uint8)], axis=1).tobytes()
    q = (ints + 8).astype(np.uint8)  # 0..15
    nibbles = q[:, :16] | (q[:, 16:] << 4)
    if dtype == "Q4_0":  # d * (q - 8)
        return np.concatenate([scale, nibbles], axis=1).tobytes()
    low = np.full((ints.shape[0], 1), -8 * 2.0 ** -entry["exponent"], "<f2").view(np.uint8)
    return np.concatenate([scale, low, nibbles], axis=1).tobytes()  # Q4_1: d * q + m, m = -8 d


def weights() -> dict:
    """The check model's float32 weights by Hugging Face name (what NumpyBackend reads)."""
    return {name: values(t) for name, t in spec()["tensors"].items()}


# -- the script --------------------------------------------------------------------------------

def _ids(n: int) -> list:
    """The script's token ids: fixed, from the same hash, none of them 0."""
    return [1 + fmix32(SEED + 7919 * i) % (CONFIG.vocab_size - 1) for i in range(n)]


IDS = _ids(67)


@dataclass(frozen=True)
class Op:
    """One call of the script, as both backends take it."""
    kind: str  # "prefill" (then its logits read back whole: "logits"), "decode", "inspect", "score", or "skip"
    # (the cache's length set to ids[0], the positions between left as they are: zeros)
    what: str  # the figures it checks, in words (a Checked's `what`)
    ids: tuple = ()
    top_k: int = 0
    score_from: int = 0
    next_id: int = 0
    hidden: tuple | None = None  # ((a, b), ...): the key ranges a knockout hides


# Short: keys within one attention workgroup (kernels.SHORT_KEYS, 128); then past it, split. The
# cache's positions 34..119 are skipped rather than computed (a "skip": both backends' length set
# past them): they hold zeros, as a fresh GPU buffer and NumpyBackend's cache both do, and every
# later query reads them as keys and values all the same, at a fraction of a prompt's cost on a
# CPU emulation of a GPU.
SKIP_TO = 120
OPS = (
    Op("prefill", "a prompt read within one attention workgroup (prefill_short, head, top_k): the 8 best "
       "logits and the normalizer", tuple(IDS[:24]), top_k=TOP_K),
    Op("logits", "the same step's logits over the whole vocabulary"),
    Op("decode", "a token decoded from the GPU's own choice (decode_short, head): every logit"),
    Op("inspect", "a token inspected (inspect_short, lens): its attention weights and each layer's logit lens",
       (IDS[24],), top_k=TOP_K),
    Op("score", "a pass with keys hidden, scored (prefill_hidden_short, score): each row's target logit, "
       "normalizer and best", tuple(IDS[25:33]), score_from=2, next_id=IDS[33], hidden=((3, 12),)),
    Op("skip", "", (SKIP_TO,)),
    Op("prefill", "a prompt read past 128 keys, attention split and merged (prefill, head): every logit",
       tuple(IDS[33:57])),
    Op("decode", "a token decoded past 128 keys, the o projection merging the splits (decode, head): every logit"),
    Op("inspect", "a token inspected past 128 keys (inspect, lens): attention weights and logit lens", (IDS[57],),
       top_k=TOP_K),
    Op("score", "a pass past 128 keys with two ranges of keys hidden, scored (prefill_hidden, score)",
       tuple(IDS[58:66]), score_from=1, next_id=IDS[66], hidden=((8, 30), (60, 126))),
)
RUNS = tuple(op for op in OPS if op.kind != "skip")  # the ops that run and are compared


def plan_of(program: dict) -> list:
    """The script's runs (chatlens.gpu.backend.Run) over a program built from plan(): planned by
    a WebGPUBackend as a reply, an inspection and a cause plan theirs."""
    from .gpu.backend import Run, WebGPUBackend

    gpu = WebGPUBackend(program, None)
    vocab = gpu.vocab
    runs = []
    for op in OPS:
        if op.kind == "skip":
            gpu.length = op.ids[0]
        elif op.kind == "prefill":  # a whole vocabulary's top-k is more than the GPU's: its logits are read back
            runs.append(gpu.plan(list(op.ids), op.top_k or vocab))
        elif op.kind == "logits":
            runs.append(Run((), b"", "logits", 0, False))
        elif op.kind == "decode":
            runs.append(gpu.plan(None, vocab))
        elif op.kind == "inspect":
            runs.append(gpu.plan_inspect(op.ids[0], op.top_k))
        else:
            runs.append(gpu.plan_score(list(op.ids), score_from=op.score_from, next_id=op.next_id, hidden=op.hidden))
    return runs


# -- what is compared --------------------------------------------------------------------------

@dataclass(frozen=True)
class Checked:
    """One run's figures against the reference."""
    what: str = doc("what was computed and compared, in words")
    passed: bool = doc("whether every figure is within the tolerance")
    max_diff: float = doc("the largest absolute difference among its figures")
    differed: str | None = doc("what differed most, and by how much (null when it passed)", None)


@dataclass(frozen=True)
class CheckResult:
    """The known-answer check of the GPU program on one adapter (and, once the model's own weights
    are on it, of those): what `chatlens check` prints and `chatlens.check()` resolves."""
    passed: bool = doc("whether every check passed")
    max_diff: float = doc("the largest absolute difference from the reference over every figure")
    tolerance: float = doc("the most any figure may differ (docs/fidelity.md's bound on logits)")
    checks: list = doc("[{what, passed, max_diff, differed}]: each run's figures (Checked)")
    adapter: str = doc("the adapter that computed them (numpy: the NumPy backend)")
    backend: str = doc('"webgpu" or "numpy"')
    ms: float | None = doc("how long the check took, pipelines compiled and weights made included", None)
    setup_ms: float | None = doc("of ms: the program built, its pipelines compiled, its weights made and uploaded "
                                 "(the rest ran the script)", None)
    cached: bool = doc("kept from an earlier run on the same adapter, build and weights (the page's)", False)
    fault: str | None = doc("the fault a test build put in the GPU program on purpose (chatlens.gpu.fault), or null",
                            None)
    sentence: str = doc("the result in a sentence, naming what differed and by how much", "")
    weights: str | None = doc('the page\'s: "checked" (the model\'s own weights among the checks), "no reference for '
                              'these weights", or null (none on the GPU yet)', None)


def _f32s(raw: bytes, at: int, n: int) -> list:
    return list(struct.unpack_from(f"<{n}f", raw, at))


def _floats(b64: str) -> list:
    raw = base64.b64decode(b64)
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


class _Diffs:
    """The largest difference among a run's figures, and which figure it was. A figure that is not
    a number, or an id that should not be there, fails the run with its own sentence (its size: how
    far the id's reference logit lies below the best ones)."""

    def __init__(self):
        self.max, self.where, self.failed = 0.0, None, None

    def add(self, got, want, where):
        d = abs(got - want)
        if d != d or d == math.inf:  # NaN or infinity: the GPU wrote no number
            return self.fail(f"{where}: {got} against {want:.7g}", MISSING)
        if d > self.max:
            self.max, self.where = d, f"{where}: {got:.7g} against {want:.7g}"

    def fail(self, sentence, by):
        self.failed = self.failed or sentence
        self.max = max(self.max, by)


MISSING = 1e9  # the size of a difference that is no number (JSON has no infinity): far past any tolerance


def _ids_agree(d: _Diffs, got_ids, ref_row, where):
    """Each id the GPU ranked among its k best must be among the reference's k best, or within
    TOLERANCE of its k-th (a near-tie: another rounding may take it)."""
    kth = sorted(ref_row, reverse=True)[len(got_ids) - 1]
    for rank, i in enumerate(got_ids):
        if not 0 <= i < len(ref_row):
            d.fail(f"{where}: id {i} came {rank + 1}th, outside the vocabulary", MISSING)
        elif ref_row[i] < kth - TOLERANCE:
            d.fail(f"{where}: id {i} came {rank + 1}th, where the reference's {len(got_ids)} best do not have it",
                   kth - ref_row[i])


def _log_z(row) -> float:
    big = max(row)
    return big + math.log(math.fsum(math.exp(x - big) for x in row))


def compare(reference: dict, meta: dict, runs, raws, adapter: str = "", backend: str = "webgpu",
            fault=None) -> CheckResult:
    """Each run's bytes (raws, in the runs' order) against the reference's figures; meta: the
    check program's (program["meta"]), whose layout the bytes follow."""
    if reference.get("format") != FORMAT or len(reference.get("figures", ())) != len(RUNS):
        raise ChatlensError("the check's reference is not this version's chatlens-gpu-check file: build the site again")
    from .gpu.backend import WebGPUBackend

    reader = WebGPUBackend({"meta": meta}, None)
    figures = reference["figures"]
    vocab = CONFIG.vocab_size
    checks = []
    for op, run, raw, fig in zip(RUNS, runs, raws, figures):
        d = _Diffs()
        raw = bytes(raw)
        if op.kind == "prefill" and run.readback == "top_k":
            logits = _floats(fig["logits"])
            k = run.top_k
            pairs = struct.unpack_from(f"<{2 * k}I", raw, 0)
            got = [(pairs[2 * i], struct.unpack_from("<f", raw, 8 * i + 4)[0]) for i in range(k)]
            _ids_agree(d, [i for i, _ in got], logits, "the top-k")
            for i, logit in got:
                if 0 <= i < vocab:
                    d.add(logit, logits[i], f"the logit of id {i}")
            big, total = struct.unpack_from("<ff", raw, 8 * meta["top_k_max"])  # after K_MAX pairs: max, sum of exp
            d.add(big + math.log(total) if total > 0 else math.nan, fig["log_z"], "the normalizer")
        elif op.kind in ("prefill", "logits", "decode"):
            got, want = _f32s(raw, 0, vocab), _floats(fig["logits"])
            for i, (g, w) in enumerate(zip(got, want)):
                d.add(g, w, f"the logit of id {i}")
        elif op.kind == "inspect":
            attention, lens = reader.read_inspect(run, raw)
            want = _floats(fig["attention"])
            flat = [x for layer in attention for head in layer for x in head]
            if len(flat) != len(want):
                d.fail(f"the attention weights: {len(flat)} figures where the reference has {len(want)}", MISSING)
            for j, (g, w) in enumerate(zip(flat, want)):
                d.add(g, w, f"attention weight {j}")
            lens_logits = _floats(fig["lens"])
            for layer, (pairs, log_z) in enumerate(lens):
                row = lens_logits[layer * vocab:(layer + 1) * vocab]
                _ids_agree(d, [i for i, _ in pairs], row, f"layer {layer}'s logit lens")
                for i, logit in pairs:
                    if 0 <= i < vocab:
                        d.add(logit, row[i], f"layer {layer}'s lens logit of id {i}")
                d.add(log_z, _log_z(row), f"layer {layer}'s lens normalizer")
        else:  # score
            rows = reader.read_score(run, raw)
            for r, ((target, log_z, top, top_logit), want) in enumerate(zip(rows, fig["rows"])):
                d.add(target, want[0], f"row {r}'s target logit")
                d.add(log_z, want[1], f"row {r}'s normalizer")
                d.add(top_logit, want[3], f"row {r}'s best logit")
                if top != want[2] and abs(want[4] - want[3]) > TOLERANCE:
                    d.fail(f"row {r}'s best id: {top}, where the reference's is {want[2]}", abs(want[3] - want[4]))
        passed = d.failed is None and d.max <= TOLERANCE
        checks.append(Checked(op.what, passed, d.max, None if passed else (d.failed or d.where)))
    return result_of(checks, adapter, backend, fault)


def result_of(checks, adapter, backend, fault=None, ms=None) -> CheckResult:
    """The result of these checks: passed when each passed; its sentence names the worst."""
    checks = list(checks)
    worst = max(checks, key=lambda c: c.max_diff)
    passed = all(c.passed for c in checks)
    if passed:
        sentence = (f"agrees with the reference within {_num(worst.max_diff)} (the tolerance is "
                    f"{_num(TOLERANCE)}) over {len(checks)} checks")
    else:
        bad = [c for c in checks if not c.passed]
        sentence = (f"computes wrong values: {bad[0].what} differed from the reference "
                    f"({bad[0].differed}; by up to {_num(bad[0].max_diff)}, the tolerance is {_num(TOLERANCE)})"
                    + (f", and {len(bad) - 1} more of its {len(checks)} checks" if len(bad) > 1 else ""))
    return CheckResult(passed=passed, max_diff=worst.max_diff, tolerance=TOLERANCE,
                       checks=[c.__dict__ for c in checks], adapter=adapter, backend=backend, ms=ms, fault=fault,
                       sentence=sentence)


def _num(x: float) -> str:
    return "a figure that is no number" if x >= MISSING else f"{x:.1g}" if x else "0"


# -- the model's own weights ---------------------------------------------------------------------
# Once the real weights are on the GPU: the first step of a short fixed text (WEIGHTS_TEXT, read
# as plain text, no template) against what CPython computed on the same file, whose sha256 keys
# the reference (chatlens.host.check.weights_reference; `serve`'s mirror publishes one for each
# copy it serves). The GPU's 10 best ids and their logits, and the normalizer, within TOLERANCE.

WEIGHTS_TEXT = "What is the capital of France?"
WEIGHTS_TOP_K = 10
WEIGHTS_WHAT = "the model's own weights: the first step after “{text}” (10 best logits and the normalizer)"


def weights_entry(reference: dict, top_k, log_z) -> Checked:
    """The GPU's first step (its top_k (id, logit) pairs and log_z) against a weights reference:
    {text, ids, top: [[id, logit], ...] (the 64 best), log_z}."""
    want = {int(i): x for i, x in reference["top"]}
    d = _Diffs()
    kth = reference["top"][min(len(top_k), len(reference["top"])) - 1][1]
    for rank, (i, logit) in enumerate(top_k):
        if i not in want or want[i] < kth - TOLERANCE:
            below = kth - want.get(i, reference["top"][-1][1])  # at least this far below the best
            d.fail(f"id {i} came {rank + 1}th, where the reference's {len(top_k)} best do not have it", below)
            continue
        d.add(logit, want[i], f"the logit of id {i}")
    d.add(log_z, reference["log_z"], "the normalizer")
    passed = d.failed is None and d.max <= TOLERANCE
    return Checked(WEIGHTS_WHAT.format(text=reference.get("text") or f"the ids {reference['ids']}"), passed, d.max,
                   None if passed else (d.failed or d.where))


def with_weights(result: CheckResult, entry: Checked) -> CheckResult:
    """The result with the weights check added (its checks, its verdict and sentence again)."""
    checks = [Checked(**c) for c in result.checks if not c["what"].startswith("the model's own weights")] + [entry]
    from dataclasses import replace

    return replace(result_of(checks, result.adapter, result.backend, result.fault, result.ms), weights="checked",
                   setup_ms=result.setup_ms)


# -- the worker's requests (chatlens.worker, chatlens.protocol) ----------------------------------

@dataclass(frozen=True)
class CheckProgram:
    """Build the check model's GPU program for this adapter (as gpu_program builds a model's)."""
    features: list = doc("the adapter's features", factory=list)
    limits: dict = doc("the adapter's limits, by WebGPU's names", factory=dict)
    info: dict | None = doc("what the adapter says of itself (gpu_program's info: the emulated GEMM on a CPU "
                            "emulation)", None)
    fault: bool = doc("a faulty test build's program (chatlens.gpu.fault)", False)


@dataclass(frozen=True)
class CheckProgramAnswer:
    """The check's program and what to run on it."""
    program: dict = doc("the GPU program (chatlens.gpu.program's plain data)")
    runs: list = doc("the script's runs, in order (GpuRun's shape): each one's bytes go to check_read")
    spec: dict = doc("the check model's weights to make (check.spec(): site/js/gpu/checkmodel.mjs makes them)")


@dataclass(frozen=True)
class CheckRead:
    """Compare the bytes each run of check_program's read back (extra argument: a list of byte
    arrays, in the runs' order) with the reference."""
    reference: dict = doc("check.json: the reference build.json names")
    adapter: str = doc("the adapter's name, for the result", "")


@dataclass(frozen=True)
class CheckWeights:
    """The run that computes a model's first step after its weights reference's ids on the GPU."""
    reference: dict = doc("the weights reference {text, ids, top, log_z} (the mirror's, for this file)")
    model: str = doc("instruct or base", "instruct")


@dataclass(frozen=True)
class CheckWeightsAnswer:
    """check_weights' answer."""
    runs: list = doc("the runs (GpuRun's shape), in order; the last one's bytes go to check_weights_read")


@dataclass(frozen=True)
class CheckWeightsRead:
    """The last check_weights run's bytes (extra argument) against its reference."""
    reference: dict = doc("as check_weights'")


# -- the reference's file (check.json) ---------------------------------------------------------

def reference_id(reference: dict) -> str:
    """What keys a kept result to this reference (with the adapter and the build's Python)."""
    text = json.dumps({k: reference[k] for k in ("format", "version", "figures")}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]

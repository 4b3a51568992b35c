"""The WebGPU backend (chatlens.gpu) against the NumPy backend, natively through wgpu-py.

A tiny seeded random Llama (2 layers, dim 64, 4/2 heads, head_dim 16, ffn 96, vocab 300,
untied output) is written as the files a user has: a GGUF in Q8_0, Q4_1 and a mix of
precisions (by the `gguf` package's writer, Q/K rows permuted as llama.cpp's converter does)
and Hugging Face folders in BF16, F16 and F32 (by the `safetensors` package). The GPU reads
each file's bytes as they are; NumPy reads the same file through chatlens.source.load_model.
A prompt past 128 keys runs on a model of the real one's attention shape (random, 2 layers).
Then the real model, uploaded once for each KV cache precision: one short chat prompt and 5
decode steps, and a chat with an f16 cache against transformers' greedy ids.

Tolerances: logits within 1e-4 absolute on the tiny model (|logits| up to about 10), 1e-3 on
the real one (30 layers, |logits| up to about 25); chosen ids equal wherever the reference's
two best logits are further apart than 1e-3 (they are, on these prompts).
A program with an f16 KV cache (program.KV_CACHE = "F16", two per u32) is held to a NumPy
reference whose cache holds f16 too (`f16_cache`): both attend over the same rounded keys and
values, so every other step is compared at f32 precision, within TOL_F16 = 1e-3: a key or value
within f32 rounding of the midpoint between two f16s can round to the other one on the GPU (one
f16 ulp, 2^-11 relative), which moved the tiny model's logits by up to 2.5e-4 (measured over
these sources; against NumPy's f32 cache they move by up to 2.3e-2, so 1e-3 still tells a
flipped rounding from a wrong kernel). What f16 itself changes is measured on the real model
(`test_real_model_f16_cache_keeps_transformers_greedy_ids`): its greedy ids against transformers'
up to the first near-tie, and its logits against NumPy's f32 cache over the same steps.
On this machine wgpu finds lavapipe (a CPU Vulkan device): no test skips for want of a GPU.
"""

import json
import math
import struct

import gguf
import numpy as np
import pytest

from chatlens.config import ModelConfig
from chatlens.errors import ChatlensError, ModelFormatError
from chatlens.gpu import program, weight_plan
from chatlens.gpu.backend import WebGPUBackend
from chatlens.host.native_gpu import adapter_available, open_native
from chatlens.source import load_model

Q = gguf.GGMLQuantizationType
TINY = ModelConfig(n_layers=2, dim=64, n_heads=4, n_kv_heads=2, head_dim=16, ffn_dim=96, vocab_size=300,
                   n_ctx=256, rope_base=10000.0, norm_eps=1e-5, tied_output=False)
TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"t{i}" for i in range(3, TINY.vocab_size)]
TEMPLATE = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
PROMPT = [1, 17, 290, 3, 3, 41, 100, 7, 250, 19, 64, 2, 5] * 6  # 78 tokens: more than one prefill chunk of 32
TOL = 1e-4
TOL_F16 = 1e-3  # an f16 cache against NumPy's f16 one: see above
# The real model's widths (dim 576, sums of up to 1536 products, logits up to about 13): f32 sums in
# the GPU's order drift past TOL from NumPy's; lavapipe on one Xeon put a logit of 5.3 off by 1.04e-4.
TOL_WIDE = 1e-3
F16_CACHE_LOGITS = 0.05  # the real model's logits, f16 cache against f32: 1.7e-2 at most, measured on F16_CHATS

# GGUF name -> Hugging Face name ({i}: the layer)
GGUF_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "blk.{i}.attn_norm.weight": "model.layers.{i}.input_layernorm.weight",
    "blk.{i}.attn_q.weight": "model.layers.{i}.self_attn.q_proj.weight",
    "blk.{i}.attn_k.weight": "model.layers.{i}.self_attn.k_proj.weight",
    "blk.{i}.attn_v.weight": "model.layers.{i}.self_attn.v_proj.weight",
    "blk.{i}.attn_output.weight": "model.layers.{i}.self_attn.o_proj.weight",
    "blk.{i}.ffn_norm.weight": "model.layers.{i}.post_attention_layernorm.weight",
    "blk.{i}.ffn_gate.weight": "model.layers.{i}.mlp.gate_proj.weight",
    "blk.{i}.ffn_up.weight": "model.layers.{i}.mlp.up_proj.weight",
    "blk.{i}.ffn_down.weight": "model.layers.{i}.mlp.down_proj.weight",
}


def random_weights(cfg=TINY, seed=0) -> dict:
    """Hugging Face names and layout; scaled so activations and logits stay in a sane range."""
    rng = np.random.default_rng(seed)

    def w(*shape, scale=1.0):
        return (scale * rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)

    def norm():
        return (1 + 0.2 * rng.standard_normal(cfg.dim)).astype(np.float32)

    q, kv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    out = {"model.embed_tokens.weight": w(cfg.vocab_size, cfg.dim, scale=8.0), "model.norm.weight": norm()}
    if not cfg.tied_output:
        out["lm_head.weight"] = w(cfg.vocab_size, cfg.dim, scale=4.0)
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}."
        out.update({
            p + "input_layernorm.weight": norm(), p + "post_attention_layernorm.weight": norm(),
            p + "self_attn.q_proj.weight": w(q, cfg.dim, scale=2.0), p + "self_attn.k_proj.weight": w(kv, cfg.dim, scale=2.0),
            p + "self_attn.v_proj.weight": w(kv, cfg.dim), p + "self_attn.o_proj.weight": w(cfg.dim, q),
            p + "mlp.gate_proj.weight": w(cfg.ffn_dim, cfg.dim, scale=2.0), p + "mlp.up_proj.weight": w(cfg.ffn_dim, cfg.dim),
            p + "mlp.down_proj.weight": w(cfg.dim, cfg.ffn_dim),
        })
    return out


def llama_cpp_permute(w, n_heads):
    """llama.cpp's convert_hf_to_gguf.py permute() of Q/K rows, for its adjacent-pair RoPE."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(path, cfg, weights, qtype_of):
    """A llama GGUF as llama.cpp's converter writes one; qtype_of(gguf name) picks each tensor's type."""
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_block_count(cfg.n_layers)
    writer.add_embedding_length(cfg.dim)
    writer.add_feed_forward_length(cfg.ffn_dim)
    writer.add_head_count(cfg.n_heads)
    writer.add_head_count_kv(cfg.n_kv_heads)
    writer.add_rope_dimension_count(cfg.head_dim)
    writer.add_context_length(cfg.n_ctx)
    writer.add_rope_freq_base(cfg.rope_base)
    writer.add_layer_norm_rms_eps(cfg.norm_eps)
    writer.add_vocab_size(cfg.vocab_size)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt2")
    writer.add_token_list(TOKENS)
    writer.add_token_types([3, 3, 3] + [1] * (len(TOKENS) - 3))
    writer.add_eos_token_id(2)
    writer.add_chat_template(TEMPLATE)
    by_hf = {}
    for g, h in GGUF_NAMES.items():
        for i in range(cfg.n_layers):
            by_hf[h.format(i=i)] = g.format(i=i)
    for hf, array in weights.items():
        name = by_hf[hf]
        if name.endswith("attn_q.weight"):
            array = llama_cpp_permute(array, cfg.n_heads)
        elif name.endswith("attn_k.weight"):
            array = llama_cpp_permute(array, cfg.n_kv_heads)
        qtype = Q.F32 if array.ndim == 1 else qtype_of(name)
        if qtype in (Q.F32, Q.F16):
            writer.add_tensor(name, array.astype(np.float32 if qtype == Q.F32 else np.float16))
        else:
            writer.add_tensor(name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_hf(folder, cfg, weights, dtype):
    """A Hugging Face folder: config, a minimal tokenizer, and model.safetensors from the reference writer."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**cfg.to_hf(), "eos_token_id": 2}))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": 2}))
    (folder / "tokenizer.json").write_text(json.dumps({
        "model": {"type": "BPE", "vocab": {t: i for i, t in enumerate(TOKENS)}, "merges": []},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "added_tokens": [{"id": i, "content": TOKENS[i], "special": True} for i in range(3)]}))
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": TEMPLATE, "eos_token": "<|im_end|>"}))
    torch_dtype = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[dtype]
    save_file({k: torch.from_numpy(v).to(torch_dtype) for k, v in weights.items()}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    return folder


def mixed(name):
    """A file as mixed as llama.cpp's: q/k, v, o, ffn and the embedding in different precisions."""
    for part, qtype in (("attn_q", Q.Q4_0), ("attn_k", Q.Q4_0), ("attn_v", Q.Q8_0), ("attn_output", Q.F16),
                        ("ffn_gate", Q.Q4_1), ("ffn_up", Q.Q4_1), ("ffn_down", Q.Q8_0), ("token_embd", Q.F16)):
        if part in name:
            return qtype
    return Q.F32  # output.weight


SOURCES = {
    "gguf-q8_0": lambda d: write_gguf(d / "m.gguf", TINY, random_weights(), lambda n: Q.Q8_0),
    "gguf-q4_1": lambda d: write_gguf(d / "m.gguf", TINY, random_weights(),
                                      lambda n: Q.Q8_0 if n == "token_embd.weight" else Q.Q4_1),
    "gguf-mixed": lambda d: write_gguf(d / "m.gguf", TINY, random_weights(), mixed),
    "hf-bf16": lambda d: write_hf(d / "hf", TINY, random_weights(), "BF16"),
    "hf-f16": lambda d: write_hf(d / "hf", TINY, random_weights(), "F16"),
    "hf-f32-tied": lambda d: write_hf(d / "hf", TIED, random_weights(TIED), "F32"),
}
TIED = ModelConfig(**{**TINY.to_dict(), "tied_output": True})


@pytest.fixture(scope="module", params=sorted(SOURCES))
def source(request, tmp_path_factory):
    """(path, the NumPy model loaded from it) for each kind of file."""
    path = SOURCES[request.param](tmp_path_factory.mktemp(request.param))
    return path, load_model(path)


def test_wgpu_finds_an_adapter():
    assert adapter_available(), "wgpu found no adapter: install mesa-vulkan-drivers (lavapipe) or a GPU driver"


def test_the_weight_plan_names_the_files_byte_ranges(source):
    path, model = source
    plan = weight_plan(path)
    assert plan["config"] == model.config.to_dict()
    assert plan["rope"] == ("gguf" if path.suffix == ".gguf" else "hf")
    root = path if path.is_dir() else path.parent
    for name, t in plan["tensors"].items():
        assert list(model.weights[name].shape) == t["shape"]
        raw = (root / t["file"]).read_bytes()[t["offset"]:t["offset"] + t["nbytes"]]
        assert len(raw) == t["nbytes"]
    json.dumps(plan)  # plain data: Pyodide hands it to JS


def f16_cache(backend):
    """A NumPy backend whose KV cache holds float16, as the GPU's does: keys and values are
    rounded as they are stored (round to nearest even, as pack2x16float) and attention reads
    them back exactly, its products in float32."""
    backend.k_cache = backend.k_cache.astype(np.float16)
    backend.v_cache = backend.v_cache.astype(np.float16)
    return backend


def same_top_k(got, want, logits, tol):
    """The GPU's top-k is best first and its logits are NumPy's within tol; its ids are NumPy's
    except where two logits lie within tol of each other (either order is then right)."""
    values = [v for _, v in got]
    assert values == sorted(values, reverse=True) and len(got) == len(want)
    np.testing.assert_allclose(values, logits[[i for i, _ in got]], atol=tol, rtol=0)
    for j, ((i, _), (wi, wv)) in enumerate(zip(got, want)):
        assert i == wi or abs(logits[i] - wv) < tol, f"top-k entry {j}: {i} against {wi}"


def compare_run(gpu, ref, prompt, n_decode, top_k=0, tol=TOL):
    """Prefill then n_decode greedy steps on both; the GPU's logits within tol at every step."""
    got, want = gpu.prefill(prompt, top_k), ref.prefill(prompt, top_k)
    for step in range(n_decode + 1):
        np.testing.assert_allclose(gpu.last_logits(), ref.last_logits(), atol=tol, rtol=0, err_msg=f"step {step}")
        assert got.id == want.id == int(np.argmax(ref.last_logits()))
        if top_k:
            same_top_k(got.top_k, want.top_k, ref.last_logits(), tol)
        if step < n_decode:
            got, want = gpu.decode(got.id, top_k), ref.decode(want.id, top_k)
    assert gpu.length == ref.length == len(prompt) + n_decode


def test_logits_and_ids_equal_numpy_on_the_same_file(source):
    path, model = source
    gpu = open_native(path, 128, chunk=32)
    assert gpu.name.startswith("webgpu: ") and gpu.capacity == 128
    compare_run(gpu, model.backend(128), PROMPT, 3, top_k=5)


@pytest.mark.parametrize("kv", ["F32", "F16"])
def test_an_inspection_equals_numpy_s_on_the_same_file(source, monkeypatch, kv):
    """chatlens.inspection on the GPU (an inspect run: attention weights, each block's output
    through the lens' matvecs and top-k) against NumPy's on the same file: within one attention
    workgroup's keys (inspect_short) and past it (split attention, then the inspect sequence),
    the f16 cache against NumPy's f16 one. Lens ids equal but where two probabilities are within
    the tolerance (either order is then right)."""
    from chatlens.cache import PromptCache
    from chatlens.inspection import Inspecting
    from chatlens.pull import greedy

    monkeypatch.setattr(program, "KV_CACHE", kv)
    path, model = source
    tol = TOL if kv == "F32" else TOL_F16
    ids = (PROMPT * 3)[:160]
    gpu = PromptCache(open_native(path, 256, chunk=64))
    ref = model.backend(256)
    numpy = PromptCache(f16_cache(ref) if kv == "F16" else ref)
    for position in (60, 159):
        got, want = greedy(Inspecting(gpu, ids, position, 5)), greedy(Inspecting(numpy, ids, position, 5))
        assert gpu.ids == numpy.ids == ids[:position + 1] and gpu.backend.length == position + 1
        np.testing.assert_allclose(got.attention, want.attention, atol=tol, rtol=0)
        for g, w in zip(got.lens, want.lens):
            probs = [p for _, p in w]
            np.testing.assert_allclose([p for _, p in g], probs, atol=tol, rtol=0)
            for j, ((i, _), (wi, _)) in enumerate(zip(g, w)):
                assert i == wi or min(abs(probs[j] - q) for q in probs[:j] + probs[j + 1:] + [0.0]) < tol
        assert got.chosen_id == want.chosen_id


def test_an_f16_cache_equals_numpy_over_the_same_f16_values(source, monkeypatch):
    monkeypatch.setattr(program, "KV_CACHE", "F16")
    path, model = source
    gpu = open_native(path, 128, chunk=32)
    assert gpu.meta["kv"] == "F16" and gpu.meta["kv_value_bytes"] == 2
    compare_run(gpu, f16_cache(model.backend(128)), PROMPT, 3, top_k=5, tol=TOL_F16)


def test_prefill_equals_token_by_token_decode(source):
    path, _ = source
    at_once = open_native(path, 32)
    step = at_once.prefill(PROMPT[:20])
    one_by_one = open_native(path, 32)
    for i in PROMPT[:20]:
        last = one_by_one.decode(i)
    assert last.id == step.id
    np.testing.assert_allclose(one_by_one.last_logits(), at_once.last_logits(), atol=TOL, rtol=0)


def test_truncate_then_continue_equals_a_fresh_run(source):
    path, _ = source
    gpu = open_native(path, 96)
    gpu.prefill(PROMPT[:70])
    gpu.truncate(5)
    assert gpu.length == 5
    step = gpu.prefill([9, 8, 7])
    fresh = open_native(path, 96)
    assert step.id == fresh.prefill(PROMPT[:5] + [9, 8, 7]).id
    np.testing.assert_allclose(gpu.last_logits(), fresh.last_logits(), atol=TOL, rtol=0)
    gpu.truncate(1000)  # more than it holds keeps everything
    assert gpu.length == 8
    gpu.reset()
    assert gpu.length == 0
    assert gpu.prefill(PROMPT[:6]).id == open_native(path, 96).prefill(PROMPT[:6]).id


def test_long_prompts_in_small_chunks_split_the_attention(tmp_path):
    """Chunks of 16 tokens over a 200-token cache: many prefill chunks, attention over 7 key splits."""
    path = SOURCES["gguf-q8_0"](tmp_path)
    ref = load_model(path).backend(256)
    gpu = open_native(path, 256, chunk=16)
    assert gpu.meta["splits"] == 8
    compare_run(gpu, ref, (PROMPT * 3)[:200], 2)


class ShortWhileItFits:
    """An executor that runs a program's *_short sequences (attention in one dispatch) while the
    step's keys fit them, as meta["short"] says, and its long ones after."""

    def __init__(self, executor, meta):
        self.executor, self.short = executor, meta["short"]
        self.short_runs = 0

    def _sequences(self, sequences, params):
        if params:
            n_tokens, start = struct.unpack("<II", params[:8])  # program.STEP_FIELDS' first two
            if start + n_tokens <= self.short["keys"]:
                self.short_runs += 1
                return [self.short.get(name, name) for name in sequences]
        return sequences

    def run(self, sequences, params=b"", readback=None):
        return self.executor.run(self._sequences(sequences, params), params, readback)

    def submit(self, sequences, params=b"", readback=None):
        return self.executor.submit(self._sequences(sequences, params), params, readback)

    def collect(self, ticket):
        return self.executor.collect(ticket)


@pytest.mark.parametrize("kv", ["F32", "F16"])
def test_short_sequences_equal_numpy_then_hand_over_to_the_split_ones(tmp_path, monkeypatch, kv):
    """A program for 256 keys splits its attention; its short sequences write it directly up to
    128 keys, one dispatch fewer a layer. Chunks of 16 over 200 tokens run both."""
    monkeypatch.setattr(program, "KV_CACHE", kv)
    path = SOURCES["gguf-q4_1"](tmp_path)
    ref = load_model(path).backend(256)
    ref, tol = (f16_cache(ref), TOL_F16) if kv == "F16" else (ref, TOL)
    gpu = open_native(path, 256, chunk=16)
    short = gpu.meta["short"]
    assert short["keys"] == 128 and gpu.meta["splits"] > 1
    layers = TINY.n_layers
    # a decode step: 5 a layer either way (past 128 keys the o projection merges the splits); a
    # prefill chunk past them merges in a pass of its own
    runs = gpu.meta["dispatches"]
    assert runs[short["decode"]] == runs["decode"] == runs[short["prefill"]] == runs["prefill"] - layers == 1 + 5 * layers
    gpu.executor = ShortWhileItFits(gpu.executor, gpu.meta)
    compare_run(gpu, ref, (PROMPT * 3)[:120], 2, tol=tol)  # every step short
    gpu.reset()
    ref.reset()
    compare_run(gpu, ref, (PROMPT * 3)[:200], 2, tol=tol)  # short, then split
    assert gpu.executor.short_runs == (8 + 2) + 8  # chunks and decodes up to 128 keys

def test_a_decode_step_takes_5_dispatches_a_layer_at_every_context(gguf_path):
    """The real model's program (pure Python, no GPU): 153 dispatches a token (30 layers of 5,
    the embedding, the head and the argmax) whether its attention is split or not."""
    plan = weight_plan(gguf_path)
    for n_ctx in (64, 128, 129, 369, 8192):
        built = program.build_program(plan, n_ctx)
        runs, short = built["meta"]["dispatches"], built["meta"]["short"]
        assert runs["decode"] + runs["head"] == 153, n_ctx
        assert (short is None) == (n_ctx <= 128) and (short is None or runs[short["decode"]] == runs["decode"])
        assert "attention_merge" not in [d["label"] for d in built["sequences"]["decode"]]


def test_an_inspection_adds_its_dispatches_only_to_its_own_sequences(gguf_path):
    """The real model's program: an inspect run (chatlens.inspection) takes decode's dispatches
    plus one a layer (attention_weights), then the lens: a matvec a layer and a top-k pass of
    two, 213 at every context; no ordinary sequence holds an inspection's kernel, and its one
    readback (lens top-k a layer, then attention for every key of the context) stays small."""
    plan = weight_plan(gguf_path)
    layers = plan["config"]["n_layers"]
    inspecting = ("attention-weights", "residual_keep", "store_row")
    for n_ctx in (64, 129, 8192):
        built = program.build_program(plan, n_ctx)
        runs, short, meta = built["meta"]["dispatches"], built["meta"]["short"], built["meta"]["inspect"]
        for body in ("inspect",) + ((short["inspect"],) if short else ()):
            assert runs[body] == runs["decode"] + layers and runs[body] + runs["lens"] == 213, n_ctx
        assert runs["lens"] == layers + 2
        for name in ("prefill", "decode", "head", "top_k") + ((short["prefill"], short["decode"]) if short else ()):
            assert not [d["label"] for d in built["sequences"][name] if any(k in d["label"] for k in inspecting)]
        size = built["readbacks"]["inspection"]["size"]
        assert meta["attention_at"] + 4 * layers * meta["heads"] * n_ctx <= size < 9 * 2 ** 20


def test_hidden_keys_and_scores_are_sequences_of_their_own(gguf_path):
    """The real model's program (pure Python, no GPU): a decode token stays 153 dispatches; the
    hidden-keys bodies (chatlens.cause's knockout) are prefill's dispatches with only attention's
    pipeline their own (HIDDEN set), which no other sequence runs; ordinary attention is compiled
    with HIDDEN false (it never reads the hidden fields); a score run is its body and 2 dispatches
    (the output projection of every row, the rows' reduction), its logits within one binding.
    Ordinary runs are planned as before, their new step words 0; runs serialize for the browser."""
    plan = weight_plan(gguf_path)
    layers = plan["config"]["n_layers"]
    for n_ctx in (64, 160, 8192):
        built = program.build_program(plan, n_ctx)
        runs, short, seqs = built["meta"]["dispatches"], built["meta"]["short"], built["sequences"]
        code = {p["name"]: next(m["code"] for m in built["modules"] if m["name"] == p["module"])
                for p in built["pipelines"]}
        assert runs["decode"] + runs["head"] == 153 and runs["score"] == 2
        pairs = [("prefill", "prefill_hidden")] + ([(short["prefill"], short["prefill_hidden"])] if short else [])
        hidden = set()
        for plain, hiding in pairs:
            assert runs[hiding] == runs[plain]
            differ = [(a, b) for a, b in zip(seqs[plain], seqs[hiding]) if a != b]
            assert len(differ) == layers
            for a, b in differ:
                assert b["label"] == a["label"].replace("attention", "attention-hidden", 1)
                assert "const HIDDEN: bool = true;" in code[b["pipeline"]]
                assert "const HIDDEN: bool = false;" in code[a["pipeline"]]
                hidden.add(b["pipeline"])
        for name, seq in seqs.items():
            if name not in {b for _, b in pairs}:
                assert not hidden & {d["pipeline"] for d in seq}, name
            if name != "score":
                assert "score" not in [d["label"] for d in seq], name
        assert [d["label"] for d in seqs["score"]] == [f"{built['meta']['gemm']}-store-Q8_0", "score"]
        sizes = {b["name"]: b["size"] for b in built["buffers"]}
        chunk, vocab = built["meta"]["chunk"], built["meta"]["vocab"]
        assert sizes["score_logits"] == 4 * chunk * vocab <= program.DEFAULT_LIMIT
        assert built["readbacks"]["score"]["size"] == 16 * chunk

        gpu = WebGPUBackend(built)  # runs planned, not run: the browser's host
        fields = built["meta"]["step_fields"]
        body = short["prefill"] if short else "prefill"
        run = gpu.plan(list(range(10)))
        assert run.sequences == (body, "head") and run.readback == "id"
        words = struct.unpack(f"<{len(fields)}I", run.params[:4 * len(fields)])
        assert words[fields.index("hidden_start"):fields.index("n_hidden") + 1] == (0, 0, 0, 0, 0)
        assert gpu.plan([7]).sequences == ((short["decode"] if short else "decode"), "head")
        assert gpu.plan([7], chooses=False, hidden=((1, 3),)).sequences == ((short or {}).get("prefill_hidden",
                                                                                          "prefill_hidden"),)
        run = gpu.plan_score(list(range(15)), score_from=3, next_id=9, hidden=((2, 5), (7, 8)))
        assert run.sequences == ((short or {}).get("prefill_hidden", "prefill_hidden"), "score")
        assert run.readback == "score" and run.n == 15 and gpu.length == 10 + 1 + 1 + 15
        words = struct.unpack(f"<{len(fields) + 15 + 4}I", run.params)
        assert [words[fields.index(f)] for f in ("hidden_start", "hidden_end", "score_from", "next_id", "n_hidden")] \
            == [2, 8, 3, 9, 2]
        assert words[len(fields):] == tuple(range(15)) + (2, 5, 7, 8)  # the ids, then the ranges
        assert json.loads(json.dumps(run.to_json()))["sequences"] == list(run.sequences)
        assert gpu.plan_score([4, 5], score_from=0, next_id=1).sequences == (body, "score")


def test_a_scored_pass_is_refused_what_numpy_refuses():
    built = program.build_program({"source": "arrays", "rope": "hf", "config": TINY.to_dict(), "tensors": {
        name: {"file": name, "offset": 0, "nbytes": 4 * a.size, "dtype": "F32", "shape": list(a.shape)}
        for name, a in random_weights().items()}}, 32, chunk=16)
    gpu = WebGPUBackend(built)
    for ids, score_from, next_id, hidden in (([], 0, 1, None), ([1, 2], 2, 1, None), ([1, 2], -1, 1, None),
                                             ([1, 2], 0, TINY.vocab_size, None), ([1, 2], 0, 1, ((5, 4),)),
                                             ([1, 2], 0, 1, ((-1, 4),)), (list(range(17)), 0, 1, None),
                                             ([1, 2], 0, 1, ((0, 1),) * (program.MAX_HIDDEN + 1)),
                                             ([TINY.vocab_size], 0, 1, None)):
        with pytest.raises(ChatlensError):
            gpu.plan_score(ids, score_from=score_from, next_id=next_id, hidden=hidden)
    assert gpu.length == 0
    with pytest.raises(ChatlensError, match="read_score reads"):
        gpu.read_score(gpu.plan([1, 2]), b"")
    with pytest.raises(ChatlensError, match="hidden only from ids"):
        gpu.plan(None, hidden=((0, 1),))


class Recording:
    """An executor that records the sequences of each run it submits."""

    def __init__(self, executor):
        self.executor, self.runs = executor, []

    def submit(self, sequences, params=b"", readback=None):
        self.runs.append(tuple(sequences))
        return self.executor.submit(sequences, params, readback)

    def collect(self, ticket):
        return self.executor.collect(ticket)

    def run(self, sequences, params=b"", readback=None):
        return self.collect(self.submit(sequences, params, readback))


def same_scores(got, want, tol=TOL):
    """NumpyBackend.score's rows: logits and log_z within tol, p(target) within 1e-4, the same best
    id (the seeded model has no near-tie on these rows)."""
    assert len(got) == len(want)
    for r, ((gt, gz, gi, gl), (wt, wz, wi, wl)) in enumerate(zip(got, want)):
        assert max(abs(gt - wt), abs(gz - wz), abs(gl - wl)) <= tol, r
        assert abs(math.exp(gt - gz) - math.exp(wt - wz)) <= 1e-4, r
        assert gi == wi, r


def test_a_scored_pass_equals_numpy_s_with_keys_hidden_or_not(tmp_path):
    """WebGPUBackend.score against NumpyBackend.score (chatlens.cause's passes) on a program for
    256 keys in chunks of 16: fed after 20 cached ids (the short bodies: attention in one
    dispatch) and after 120 (past 128 keys: splits of 32 merged by a pass of their own), in
    chunks of 16 with the first scored row in the second (the first runs as a prefill chunk
    that chooses nothing, hidden ones with the hidden body) and a last chunk of one; keys hidden
    or not: part of a split, a whole split, the first three. The fed ids stay cached: a decode
    after an unhidden pass equals NumPy's."""
    path = SOURCES["gguf-q4_1"](tmp_path)
    ref = load_model(path).backend(256)
    gpu = open_native(path, 256, chunk=16)
    gpu.executor = Recording(gpu.executor)
    ids = (PROMPT * 3)[:170]
    ref.prefill(ids[:120])
    gpu.prefill(ids[:120])
    cases = [(120, 169, 17, ((40, 50),)), (120, 169, 17, ((32, 64),)), (120, 169, 17, ((0, 96),)),
             (120, 169, 17, None), (20, 60, 20, ((3, 9),)), (20, 60, 20, ((3, 9), (12, 15))), (20, 60, 20, None)]
    for cached, end, score_from, hidden in cases:
        ref.truncate(cached)
        gpu.truncate(cached)
        gpu.executor.runs.clear()
        kwargs = {"score_from": score_from, "next_id": ids[end], "hidden": hidden}
        same_scores(gpu.score(ids[cached:end], **kwargs), ref.score(ids[cached:end], **kwargs))
        assert gpu.length == ref.length == end
        body = ("prefill" if hidden is None else "prefill_hidden") + ("_short" if cached == 20 else "")
        scored = (body, "score")
        want_runs = [(body,), scored, scored] + ([scored] if end - cached > 48 else [])
        assert gpu.executor.runs == want_runs, (cached, hidden)
    got, want = gpu.decode(ids[end]), ref.decode(ids[end])
    assert got.id == want.id
    np.testing.assert_allclose(gpu.last_logits(), ref.last_logits(), atol=TOL, rtol=0)


def test_more_splits_than_a_matvec_merges_take_a_merge_pass_and_equal_numpy(tmp_path, monkeypatch):
    """With fewer split weights allowed than the tiny model's 4 heads x 8 splits (kernels.MERGE_MAX),
    a decode step merges in a pass of its own, 6 dispatches a layer, and still equals NumPy."""
    from chatlens.gpu import kernels

    monkeypatch.setattr(kernels, "MERGE_MAX", 4)
    path = SOURCES["gguf-q4_1"](tmp_path)
    gpu = open_native(path, 256, chunk=16)
    assert gpu.meta["dispatches"]["decode"] == 1 + 6 * TINY.n_layers
    compare_run(gpu, load_model(path).backend(256), (PROMPT * 3)[:140], 2)


def test_top_k_equals_numpy_up_to_the_gpu_limit_and_past_it(tmp_path):
    path = SOURCES["hf-bf16"](tmp_path)
    ref = load_model(path).backend(32)
    gpu = open_native(path, 32)
    for k in (1, 32, 64, 100, 1000):  # 64 on the GPU; beyond it the backend sorts the read-back logits
        got, want = gpu.prefill(PROMPT[:9], top_k=k), ref.prefill(PROMPT[:9], top_k=k)
        assert len(got.top_k) == min(k, TINY.vocab_size)
        assert [i for i, _ in got.top_k] == [i for i, _ in want.top_k], k
        np.testing.assert_allclose([v for _, v in got.top_k], [v for _, v in want.top_k], atol=TOL, rtol=0)
        gpu.reset()
        ref.reset()


def test_ties_go_to_the_lowest_id(tmp_path):
    """An output layer of zeros makes every logit 0: the id is 0 and top-k lists ids in order."""
    weights = random_weights()
    weights["lm_head.weight"][:] = 0
    gpu = open_native(write_hf(tmp_path / "flat", TINY, weights, "F32"), 8)
    step = gpu.prefill([4, 2], top_k=5)
    assert step.id == 0 and step.top_k == tuple((i, 0.0) for i in range(5))
    assert gpu.decode(7).id == 0


def test_the_cache_capacity_and_ids_are_checked(tmp_path):
    gpu = open_native(SOURCES["hf-f16"](tmp_path), 8)
    with pytest.raises(ChatlensError, match="holds 8 tokens"):
        gpu.prefill(list(range(9)))
    gpu.prefill(list(range(8)))
    with pytest.raises(ChatlensError):
        gpu.decode(3)
    gpu.reset()
    with pytest.raises(ChatlensError, match="out of range"):
        gpu.prefill([TINY.vocab_size])
    with pytest.raises(ChatlensError):
        gpu.prefill([])


# The real model's attention shape (9 query heads over 3 KV heads of 64, dim 576, ffn 1536, tied
# output, Q4_1 with a Q8_0 embedding, as the mirror's GGUF), in 2 layers of random weights and a
# 300-token vocabulary: what the real model's past-128-keys run exercised (its chunk of 128 and one
# whose attention a pass of its own merges, decode steps whose o projection merges the splits) in a
# fraction of the real model's time on lavapipe (a 150-token real-model prefill there took 2 minutes).
REAL_SHAPE = ModelConfig(**{**TINY.to_dict(), "dim": 576, "n_heads": 9, "n_kv_heads": 3, "head_dim": 64,
                            "ffn_dim": 1536, "tied_output": True})


def test_past_128_keys_the_real_model_s_shape_equals_numpy(tmp_path):
    """A 150-token prompt, room for 160 as conftest.py's `real_gpu` has (REAL_GPU_CONTEXT), the
    program's default chunk and cache: read in a chunk of 128 and one whose attention is merged by
    a pass of its own, then 3 decode steps whose o projection merges it (x_merge): logits within
    TOL_WIDE of NumPy's, the same ids and top-k. (An f16 cache past 128 keys:
    test_short_sequences_equal_numpy_then_hand_over_to_the_split_ones.)"""
    path = write_gguf(tmp_path / "m.gguf", REAL_SHAPE, random_weights(REAL_SHAPE, seed=1),
                      lambda n: Q.Q8_0 if n == "token_embd.weight" else Q.Q4_1)
    ref = load_model(path).backend(160)
    gpu = open_native(path, 160)
    assert gpu.meta["kv"] == "F32" and gpu.meta["splits"] > 1
    assert gpu.meta["dispatches"]["decode"] == 1 + 5 * REAL_SHAPE.n_layers
    compare_run(gpu, ref, (PROMPT * 2)[:150], 3, top_k=5, tol=TOL_WIDE)


# -- the real model ---------------------------------------------------------------------------------
# One upload for each KV cache precision, shared by the session (conftest.py's `real_gpu`, room for
# 160 tokens: its attention splits past 128 keys, as the page's programs' do); each test empties it.
FRANCE = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"


def test_real_model_prefill_and_five_decode_steps_equal_numpy(model, real_gpu):
    """SmolLM2-135M-Instruct Q4_1 (Q8_0 embedding, tied output): one short chat prompt, the
    cache in f32 as NumPy's (the default): every kernel at f32 precision, within one attention
    workgroup's keys (the short sequences; an f16 cache's own difference is the last tests')."""
    ids = model.tokenizer.encode(FRANCE)
    gpu = real_gpu()
    assert gpu.meta["kv"] == "F32"
    assert gpu.meta["dispatches"]["decode"] <= 2 + 5 * model.config.n_layers
    compare_run(gpu, model.backend(64), ids, 5, top_k=5, tol=TOL_WIDE)


# A short chat (of tests/test_model.py's CHATS) whose greedy reply transformers makes without a near-tie
# for its first F16_GREEDY_STEPS steps; lavapipe decodes the real model at ~3 tokens/s. (test_model.py holds
# NumPy's greedy replies to transformers' on more chats; the f16 cache's kernels are held to NumPy's on the
# tiny models above.)
F16_CHATS = {
    "pirate": [{"role": "system", "content": "You are Captain Hook, a pirate. Always answer as a pirate would."},
               {"role": "user", "content": "Who are you?"}],
}
F16_GREEDY_STEPS = 16


@pytest.mark.parametrize("chat", sorted(F16_CHATS))
def test_real_model_f16_cache_keeps_transformers_greedy_ids(model, reference, real_gpu, chat):
    """An f16 KV cache (kv="F16", two per u32) chooses transformers' greedy ids (float32, the
    same weights) up to the first near-tie (its two best logits closer than NEAR_TIE_GAP), as the
    NumPy model does in tests/test_model.py; at least 8 steps are compared. What f16 changes
    against NumPy's f32 cache on the same steps: the same ids, and logits that move by less than
    F16_CACHE_LOGITS. Prints the largest logit differences against both."""
    torch = pytest.importorskip("torch")
    from chatlens.defaults import NEAR_TIE_GAP

    ids = model.tokenizer.encode(model.text.template.render(F16_CHATS[chat], add_generation_prompt=True))
    with torch.inference_mode():
        out = reference.generate(torch.tensor([ids]), max_new_tokens=F16_GREEDY_STEPS, do_sample=False,
                                 eos_token_id=model.eos_id, pad_token_id=model.eos_id, output_logits=True,
                                 return_dict_in_generate=True)
    theirs = out.sequences[0, len(ids):].tolist()
    gpu, numpy_f32 = real_gpu("F16"), model.backend(len(ids) + F16_GREEDY_STEPS)
    assert gpu.meta["kv"] == "F16"
    got, ref = gpu.prefill(ids), numpy_f32.prefill(ids)
    compared, worst, worst_numpy = 0, 0.0, 0.0
    for want, logits in zip(theirs, out.logits):
        logits = logits[0].numpy()
        best2 = np.sort(logits)[-2:]
        if best2[1] - best2[0] < NEAR_TIE_GAP:
            break
        worst = max(worst, float(np.abs(gpu.last_logits() - logits).max()))
        worst_numpy = max(worst_numpy, float(np.abs(gpu.last_logits() - numpy_f32.last_logits()).max()))
        assert got.id == want == ref.id, f"step {compared}: the GPU chose {got.id}, transformers {want}, NumPy {ref.id}"
        compared += 1
        if want == model.eos_id or compared == len(theirs):
            break
        got, ref = gpu.decode(got.id), numpy_f32.decode(ref.id)
    print(f"{chat}: {compared} steps, largest logit difference against transformers {worst:.2e}, "
          f"against NumPy's f32 cache {worst_numpy:.2e}")
    assert compared >= 8, f"only {compared} steps before a near-tie; pick a less ambiguous prompt"
    assert worst_numpy < F16_CACHE_LOGITS


def test_an_unknown_tensor_is_refused_the_same_way_on_both_paths(tmp_path):
    """One tensor table (ModelConfig.tensors): a folder with a tensor this Llama has no place for
    (a bias: ignored, the forward pass would be silently wrong) is refused by NumPy and the GPU."""
    weights = {**random_weights(), "model.layers.0.self_attn.q_proj.bias": np.zeros(TINY.n_heads * TINY.head_dim, np.float32)}
    folder = write_hf(tmp_path / "biased", TINY, weights, "F32")
    with pytest.raises(ModelFormatError, match="weights this Llama has no place for: model.layers.0.self_attn.q_proj.bias"):
        load_model(folder)
    with pytest.raises(ModelFormatError, match="weights this Llama has no place for: model.layers.0.self_attn.q_proj.bias"):
        open_native(folder, 8)

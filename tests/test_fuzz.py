"""Fuzzing inside the suite (hypothesis, fixed budgets, derandomized): what malformed input does to chatlens.

- the GGUF and safetensors readers, on real headers with bytes flipped, inserted and deleted and counts and
  lengths overwritten, and on random bytes: they raise only ModelFormatError, and never allocate more than a
  small multiple of the file's size (measured with tracemalloc);
- the tokenizer: any text survives encode then decode, ids and offsets equal HF `tokenizers`, and invalid
  bytes, lone surrogates and random ids decode without raising;
- chat templates (SmolLM2's and real ones of other families) on random message lists: chatlens renders exactly
  what transformers renders, and raises only TemplateError where transformers raises; window.fit on random
  conversations returns a consistent fit or raises WindowError / ChatlensError.

Each test runs a fixed number of cases (derandomized: the same cases every run, no example database); the
counts are printed at the end of the module. CHATLENS_FUZZ_SCALE=10 runs ten times as many, freshly random.
"""

import copy
import json
import os
import struct
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from chatlens.errors import ChatlensError, ModelFormatError, TemplateError, WindowError  # noqa: E402
from chatlens.gguf import GGUFFile  # noqa: E402
from chatlens.safetensors import load as load_safetensors, read_header  # noqa: E402
from chatlens.template import ChatTemplate  # noqa: E402
from chatlens.tokenizer import BYTE_TO_CHAR, Tokenizer  # noqa: E402

CASES = Counter()  # test name -> cases run
NOTES = {}  # test name -> what its cases came to


# CHATLENS_FUZZ_SCALE=N runs N times the cases, new random ones each run: a longer hunt than the suite's
SCALE = int(os.environ.get("CHATLENS_FUZZ_SCALE", "1"))


def fuzz(max_examples):
    return settings(max_examples=max_examples * SCALE, deadline=None, derandomize=SCALE == 1, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module", autouse=True)
def case_counts(request):
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None or not CASES:
        return
    with capture.global_and_fixture_disabled():  # past pytest's capture, so that -q shows it too
        reporter.write_line("")
        reporter.write_line(f"fuzz cases run: {sum(CASES.values())} in all")
        for name, n in sorted(CASES.items()):
            reporter.write_line(f"  {name}: {n}" + (f" ({NOTES[name]})" if name in NOTES else ""))


# ---------------------------------------------------------------------------------------------------------------
# Mutations of a file's bytes
# ---------------------------------------------------------------------------------------------------------------

BOUNDARY_U64 = [0, 1, 2, 3, 7, 8, 31, 255, 2**16, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63 - 1, 2**63,
                2**64 - 1]


@st.composite
def mutated(draw, data: bytes, max_edits=4):
    """`data` with a few edits: flipped bits, overwritten, inserted or deleted bytes, a 4- or 8-byte count or
    length overwritten with a boundary value, or a truncation."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, max_edits))):
        kind = draw(st.sampled_from(["flip", "byte", "insert", "delete", "u64", "u32", "truncate"]))
        at = draw(st.integers(0, max(len(out) - 1, 0)))
        if kind == "flip" and out:
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "byte" and out:
            out[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del out[at:at + draw(st.integers(1, 16))]
        elif kind in ("u64", "u32"):
            width = 8 if kind == "u64" else 4
            value = draw(st.sampled_from(BOUNDARY_U64) | st.integers(0, 2**64 - 1)) % (1 << (8 * width))
            out[at:at + width] = value.to_bytes(width, "little")
        elif kind == "truncate":
            del out[at:]
    return bytes(out)


def peak_allocation(fn, *args):
    """(fn's result or its exception, the peak of memory allocated while it ran)."""
    tracemalloc.start()
    try:
        try:
            result = fn(*args)
        except Exception as e:  # noqa: BLE001 (the caller checks which)
            result = e
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# A Python list of small objects costs up to 16 bytes a byte of input (an array of u8: a tuple and a list of
# pointers); anything far above that would be an allocation the file's counts asked for, not its contents.
MEMORY_FACTOR, MEMORY_SLACK = 32, 256 * 1024


READ = Counter()  # (test name, "read" or "refused") -> cases


def check_reader(fn, path, data, name):
    path.write_bytes(data)
    result, peak = peak_allocation(fn, path)
    if isinstance(result, Exception) and not isinstance(result, ModelFormatError):
        raise result
    assert peak <= MEMORY_FACTOR * len(data) + MEMORY_SLACK, (peak, len(data))
    CASES[name] += 1
    READ[name, "refused" if isinstance(result, ModelFormatError) else "read"] += 1
    NOTES[name] = f"{READ[name, 'read']} read, {READ[name, 'refused']} refused with ModelFormatError"
    return result


# ---------------------------------------------------------------------------------------------------------------
# GGUF
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_gguf(tmp_path_factory, metadata):
    """A small, valid GGUF written by the `gguf` package with the real model's metadata (its tokenizer cut to 300
    tokens, its merges to those they can spell) and three small tensors of the model's types."""
    gguf = pytest.importorskip("gguf")
    import numpy as np

    V = gguf.GGUFValueType
    scalar_type = {str: V.STRING, bool: V.BOOL, float: V.FLOAT32, int: V.UINT32}
    path = tmp_path_factory.mktemp("fuzz") / "small.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    tokens = metadata["tokenizer.ggml.tokens"][:300]
    vocab = set(tokens)
    for key, value in metadata.items():
        if key == "general.architecture":
            continue
        if key == "tokenizer.ggml.tokens":
            value = tokens
        elif key == "tokenizer.ggml.token_type":
            value = value[:300]
        elif key == "tokenizer.ggml.merges":
            value = [m for m in value if all(p in vocab for p in m.split(" ")) and m.replace(" ", "") in vocab][:40]
        if isinstance(value, list):
            writer.add_key_value(key, value, V.ARRAY, V.INT32 if isinstance(value[0], int) else V.STRING)
        else:
            writer.add_key_value(key, value, scalar_type[type(value)])
    rng = np.random.default_rng(0)
    writer.add_tensor("output_norm.weight", rng.standard_normal(64).astype(np.float32))
    writer.add_tensor("blk.0.attn_q.weight", gguf.quants.quantize(rng.standard_normal((4, 64)).astype(np.float32),
                                                                  gguf.GGMLQuantizationType.Q4_1),
                      raw_dtype=gguf.GGMLQuantizationType.Q4_1)
    writer.add_tensor("token_embd.weight", gguf.quants.quantize(rng.standard_normal((8, 32)).astype(np.float32),
                                                                gguf.GGMLQuantizationType.Q8_0),
                      raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    reference = gguf.GGUFReader(path)  # the unmutated file is valid: the `gguf` package and chatlens agree on it
    parsed = GGUFFile(path)
    assert {t.name for t in reference.tensors} == set(parsed.tensors) and len(parsed.tensors) == 3
    assert parsed.metadata["tokenizer.ggml.tokens"] == tokens
    Tokenizer.from_gguf(parsed.metadata)
    ChatTemplate.from_gguf(parsed.metadata)
    return path.read_bytes()


def text_side_of(metadata):
    """What loading a GGUF's text side does with its metadata; only the project's own errors may come out."""
    try:
        Tokenizer.from_gguf(metadata)
    except ChatlensError:
        pass
    try:
        ChatTemplate.from_gguf(metadata)
    except ChatlensError:
        pass


def test_small_gguf_mutated(small_gguf, tmp_path):
    @fuzz(400)
    @given(mutated(small_gguf))
    def run(data):
        result = check_reader(GGUFFile, tmp_path / "m.gguf", data, "gguf: mutated small file")
        if isinstance(result, GGUFFile):
            text_side_of(result.metadata)

    run()


METADATA_SCALAR = (st.none() | st.booleans() | st.integers(-2**63, 2**64) | st.floats()
                   | st.text(max_size=12) | st.sampled_from(["gpt2", "smollm", "llama", "", "{{ x }", "{% if %}"]))
METADATA_VALUE = METADATA_SCALAR | st.lists(METADATA_SCALAR | st.lists(METADATA_SCALAR, max_size=2), max_size=6)
TEXT_SIDE_KEYS = ["tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                  "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                  "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.chat_template",
                  "tokenizer.chat_template.tool_use", "general.alignment"]


def test_text_side_of_mutated_metadata(small_gguf, tmp_path):
    """Well-formed GGUF files whose tokenizer and template metadata hold the wrong things: the tokenizer and the
    template refuse them with the project's own errors."""
    path = tmp_path / "base.gguf"
    path.write_bytes(small_gguf)
    base = GGUFFile(path).metadata

    @st.composite
    def changed(draw):
        meta = dict(base)
        for key in draw(st.lists(st.sampled_from(TEXT_SIDE_KEYS), min_size=1, max_size=3)):
            old = meta.get(key)
            if isinstance(old, list) and old and draw(st.booleans()):  # one item of a list replaced
                items = list(old)
                items[draw(st.integers(0, len(items) - 1))] = draw(METADATA_VALUE)
                meta[key] = items
            elif draw(st.integers(0, 9)) == 0:
                meta.pop(key, None)
            else:
                meta[key] = draw(METADATA_VALUE)
        return meta

    @fuzz(300)
    @given(changed())
    def run(meta):
        CASES["gguf: tokenizer and template metadata of the wrong kinds"] += 1
        text_side_of(meta)

    run()


def test_real_gguf_prefix_mutated(gguf_path, tmp_path):
    with open(gguf_path, "rb") as f:
        prefix = f.read(256 * 1024)

    @fuzz(40)
    @given(mutated(prefix[:4096], max_edits=3), st.booleans())
    def run(head, keep_rest):
        check_reader(GGUFFile, tmp_path / "p.gguf", head + prefix[4096:] if keep_rest else head,
                     "gguf: mutated first 256 KB of the real file")

    run()


def test_random_bytes_are_not_a_gguf(tmp_path):
    header = st.sampled_from([b"", b"GGUF", b"GGUF\x03\x00\x00\x00", b"GGUF\x02\x00\x00\x00"])

    @fuzz(300)
    @given(header, st.binary(max_size=2048))
    def run(magic, rest):
        check_reader(GGUFFile, tmp_path / "r.gguf", magic + rest, "gguf: random bytes")

    run()


# ---------------------------------------------------------------------------------------------------------------
# safetensors
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_safetensors(tmp_path_factory):
    """A small file serialized by the `safetensors` package: F32, F16 and BF16 tensors, an empty one, metadata."""
    np = pytest.importorskip("numpy")
    safetensors = pytest.importorskip("safetensors")

    arrays = {"a.weight": (np.arange(6, dtype=np.float32).reshape(2, 3), "float32"),
              "b.weight": (np.ones(4, dtype=np.float16), "float16"),
              "c.bias": (np.full((2, 2), 0x3F00, dtype=np.uint16), "bfloat16"),  # 0.5 in bf16
              "d.empty": (np.zeros(0, dtype=np.float32), "float32")}
    specs = {name: safetensors.TensorSpec(dtype=dtype, shape=a.shape, data_ptr=a.ctypes.data, data_len=a.nbytes)
             for name, (a, dtype) in arrays.items()}
    path = tmp_path_factory.mktemp("fuzz") / "small.safetensors"
    path.write_bytes(bytes(safetensors.serialize(specs, metadata={"format": "pt"})))
    loaded = load_safetensors(path)
    assert set(loaded) == set(arrays) and loaded["c.bias"].tolist() == [[0.5, 0.5], [0.5, 0.5]]
    return path.read_bytes()


def read_safetensors(path):
    header, _ = read_header(path)
    return load_safetensors(path) if len(header) < 16 else header


def test_small_safetensors_mutated(small_safetensors, tmp_path):
    @fuzz(400)
    @given(mutated(small_safetensors))
    def run(data):
        check_reader(read_safetensors, tmp_path / "m.safetensors", data, "safetensors: mutated small file")

    run()


JSON_SCALAR = st.none() | st.booleans() | st.integers(-2**64, 2**64) | st.floats() | st.text(max_size=8)
JSON_VALUE = st.recursive(JSON_SCALAR, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
ENTRY = st.fixed_dictionaries({}, optional={
    "dtype": st.sampled_from(["F32", "F16", "BF16", "I8", "F64", ""]) | JSON_SCALAR,
    "shape": st.lists(st.integers(-2, 2**40) | JSON_SCALAR, max_size=4) | JSON_VALUE,
    "data_offsets": st.lists(st.integers(-2, 2**40) | JSON_SCALAR, min_size=0, max_size=3) | JSON_VALUE})


def test_safetensors_headers_of_any_json(tmp_path):
    header = st.dictionaries(st.text(max_size=10), ENTRY | JSON_VALUE, max_size=4) | JSON_VALUE

    @fuzz(300)
    @given(header, st.binary(max_size=64), st.integers(-2, 2))
    def run(value, payload, skew):
        raw = json.dumps(value).encode()
        check_reader(read_safetensors, tmp_path / "j.safetensors",
                     struct.pack("<Q", max(len(raw) + skew, 0)) + raw + payload, "safetensors: headers of any JSON")

    run()


def test_safetensors_random_bytes_and_deep_json(tmp_path):
    deep = st.integers(1, 200_000).map(lambda n: ("[" * n + "]" * n).encode())

    @fuzz(200)
    @given(st.binary(max_size=512) | deep)
    def run(rest):
        data = struct.pack("<Q", len(rest)) + rest if rest.startswith(b"[") else rest
        check_reader(read_safetensors, tmp_path / "r.safetensors", data,
                     "safetensors: random bytes and deeply nested JSON")

    run()


# ---------------------------------------------------------------------------------------------------------------
# The tokenizer
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def metadata(gguf_path):
    from chatlens.gguf import read_metadata

    return read_metadata(gguf_path)


@pytest.fixture(scope="module")
def tok(metadata):
    return Tokenizer.from_gguf(metadata)


@pytest.fixture(scope="module")
def reference(metadata):
    tokenizers = pytest.importorskip("tokenizers")
    from chatlens.host.export import tokenizer_json_from_gguf

    return tokenizers.Tokenizer.from_str(json.dumps(tokenizer_json_from_gguf(metadata)))


@pytest.fixture(scope="module")
def unspellable(tok):
    """Bytes SmolLM2's vocabulary has no token for: `tokenizers` drops them, so a character that uses one cannot
    survive a round trip (see test_tokenizer.py)."""
    return {b for b in range(256) if tok.id_of(BYTE_TO_CHAR[b]) is None}


SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<repo_name>", "<|IM_END|>", "<|im_start", "\n"]
ANY_TEXT = st.lists(st.text(max_size=24) | st.sampled_from(SPECIALS)
                    | st.text(st.characters(codec="utf-8", categories=["Zs", "Nd", "No", "Mn", "Cc", "Cf", "So"]),
                              max_size=12), max_size=6).map("".join)


def test_any_text_survives_a_round_trip_and_equals_hf_tokenizers(tok, reference, unspellable):
    @fuzz(500)
    @given(ANY_TEXT)
    def run(text):
        CASES["tokenizer: round trip and HF tokenizers"] += 1
        text = "".join(c for c in text if not unspellable.intersection(c.encode("utf-8")))
        ids, offsets = tok.encode_with_offsets(text)
        assert tok.decode(ids) == text
        theirs = reference.encode(text, add_special_tokens=False)
        assert ids == theirs.ids and offsets == theirs.offsets
        decoder = tok.incremental_decoder()
        assert "".join(decoder.add(i) for i in ids) + decoder.flush() == text

    run()


def test_lone_surrogates_and_invalid_bytes_never_raise(tok):
    with_surrogates = st.text(st.characters(codec=None, categories=["Cs", "Lu", "Zs", "Nd"]), max_size=20)

    @fuzz(300)
    @given(with_surrogates, st.lists(st.integers(0, tok.vocab_size - 1), max_size=40))
    def run(text, ids):
        CASES["tokenizer: surrogates, invalid bytes, random ids"] += 1
        encoded, offsets = tok.encode_with_offsets(text)
        assert encoded == tok.encode(text)
        assert all(0 <= a <= b <= len(text) for a, b in offsets)
        assert [a for a, _ in offsets] == sorted(a for a, _ in offsets)
        tok.decode(encoded)
        decoded = tok.decode(ids)  # random ids: partial characters come out as U+FFFD
        decoder = tok.incremental_decoder()
        assert "".join(decoder.add(i) for i in ids) + decoder.flush() == decoded
        assert all(isinstance(tok.token_text(i), str) for i in ids)

    run()


# ---------------------------------------------------------------------------------------------------------------
# Chat templates on random messages, against transformers
# ---------------------------------------------------------------------------------------------------------------

TEXT = st.text(max_size=16) | st.sampled_from(["<|im_end|>", "{{ messages }}", "CONTINUE_FINAL_MESSAGE_TAG ",
                                               " ", "\n", "Paris.", ""])
SCALAR = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(width=32) | TEXT
BLOCK = st.fixed_dictionaries({"type": st.sampled_from(["text", "image", "audio", "tool_use"])},
                              optional={"text": TEXT | SCALAR, "image": SCALAR})
CONTENT = TEXT | SCALAR | st.lists(BLOCK | SCALAR, max_size=3) | st.dictionaries(TEXT, SCALAR, max_size=2)
TOOL_CALL = st.fixed_dictionaries(
    {"type": st.just("function"),
     "function": st.fixed_dictionaries({"name": TEXT}, optional={
         "arguments": st.dictionaries(st.text(max_size=5), SCALAR, max_size=2) | TEXT})},
    optional={"id": st.sampled_from(["call12345", "abc"]) | TEXT})
ROLE = st.sampled_from(["system", "user", "assistant", "tool", "ipython", "developer", "model"]) | TEXT | SCALAR
MESSAGE = st.builds(
    lambda base, extra: {**extra, **base},
    st.fixed_dictionaries({}, optional={"role": ROLE, "content": CONTENT, "tool_calls": st.lists(TOOL_CALL, max_size=2)
                                        | SCALAR, "reasoning_content": TEXT | SCALAR, "thinking": TEXT,
                                        "tool_call_id": TEXT, "name": TEXT}),
    st.dictionaries(st.text(max_size=6), SCALAR, max_size=2))


@st.composite
def plausible(draw):
    """An alternating conversation, with or without a system message first, as most templates require."""
    messages = [{"role": "system", "content": draw(TEXT)}] if draw(st.booleans()) else []
    for i in range(draw(st.integers(1, 5))):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": draw(TEXT)})
    return messages


@st.composite
def any_messages(draw):
    """Mostly conversations a template can render, so that both of its paths are exercised, then odder ones."""
    kind = draw(st.sampled_from(["plausible"] * 6 + ["odd messages"] * 2 + ["anything"] * 2))
    if kind == "plausible":
        return draw(plausible())
    if kind == "odd messages":
        return draw(st.lists(MESSAGE, min_size=1, max_size=4))
    return draw(st.lists(MESSAGE | SCALAR, max_size=4) | MESSAGE | SCALAR)


MESSAGES = any_messages()
TOOLS = st.none() | st.none() | st.none() | st.lists(st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries(
    {"name": TEXT}, optional={"description": TEXT, "parameters": st.dictionaries(TEXT, SCALAR, max_size=2)})})
    | SCALAR, max_size=2) | SCALAR | st.dictionaries(TEXT, SCALAR, max_size=1)
DOCUMENTS = st.none() | st.none() | st.none() | st.lists(st.fixed_dictionaries({"title": TEXT, "text": TEXT}) | SCALAR,
                                                          max_size=2) | SCALAR
OPTIONS = st.fixed_dictionaries({}, optional={
    "add_generation_prompt": st.booleans(), "continue_final_message": st.booleans()
    | st.sampled_from(["content", "reasoning_content", "thinking"]), "tools": TOOLS, "documents": DOCUMENTS})

FUZZED_TEMPLATES = ["qwen2.5-instruct", "llama-3.1-instruct", "gemma-3-it", "mistral-nemo-instruct-2407",
                    "lfm2.5", "command-r7b-tool_use"]
SPECIAL = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}


@pytest.fixture(scope="module")
def hf_tokenizer():
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizers.Tokenizer(tokenizers.models.BPE()),
                                                **SPECIAL)


def same_as_transformers(hf, source, messages, options):
    """chatlens renders what transformers renders, or raises TemplateError where it raises. Messages that are not
    a list are refused outright (transformers renders a string as an empty conversation)."""
    hf.chat_template = source
    try:
        theirs = hf.apply_chat_template(copy.deepcopy(messages), tokenize=False, **copy.deepcopy(options))
    except Exception as e:  # noqa: BLE001 (any failure of the reference)
        theirs = e
    try:
        ours = ChatTemplate(source, special_tokens=SPECIAL).render(messages, **options)
    except TemplateError as e:
        assert isinstance(theirs, Exception) or not isinstance(messages, (list, tuple)), (e, theirs)
        return "raised"
    assert ours == theirs
    return "rendered"


@pytest.fixture(scope="module")
def real_templates():
    folder = Path(__file__).parent / "templates"
    return {name: (folder / f"{name}.jinja").read_text(encoding="utf-8") for name in FUZZED_TEMPLATES}


def test_random_messages_render_like_transformers(hf_tokenizer, real_templates, metadata):
    sources = [metadata["tokenizer.chat_template"]] + [real_templates[n] for n in FUZZED_TEMPLATES]
    outcomes = Counter()

    @fuzz(700)
    @given(st.sampled_from(sources), MESSAGES, OPTIONS)
    def run(source, messages, options):
        CASES["templates: random messages against transformers"] += 1
        outcomes[same_as_transformers(hf_tokenizer, source, messages, options)] += 1

    run()
    NOTES["templates: random messages against transformers"] = (
        f"{outcomes['rendered']} rendered identically, {outcomes['raised']} raised TemplateError")
    assert outcomes["rendered"] > 150 and outcomes["raised"] > 150, outcomes  # both paths were exercised


def test_random_conversations_fit_the_window_or_say_why(tok, metadata):
    from chatlens import window

    template = ChatTemplate.from_gguf(metadata)
    turn = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "tool"]), "content": TEXT})

    @fuzz(150)
    @given(st.lists(turn, max_size=8), TEXT, st.integers(1, 400), st.integers(0, 200),
           st.none() | TEXT)
    def run(history, new, size, reserve, system):
        CASES["window: random conversations"] += 1
        messages = history + [{"role": "user", "content": new}]
        try:
            fitted = window.fit(tok, template, system=system, messages=messages, window=size, reserve=reserve)
        except WindowError as e:
            assert "window" in str(e)
            return
        except ChatlensError:
            return
        assert fitted.ids == tok.encode(fitted.text) and len(fitted.ids) <= size - reserve
        assert "".join(p["text"] for p in fitted.pieces) == fitted.text
        assert sum(p["count"] for p in fitted.pieces) == len(fitted.ids)

    run()

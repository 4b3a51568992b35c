"""The NumPy model against transformers (float32, torch 2.13) on the same weights.

Greedy rule used throughout: generated ids must be identical up to the first step where the
reference's two best logits are closer than GAP (0.01). At such a near-tie a different but
correct float rounding may legitimately pick the other token, so the comparison stops there.
"""

import numpy as np
import pytest
import torch
import transformers

from chatlens.pull import Pull, greedy
from chatlens.host.reference import reference_model as hf_model
from chatlens.model import EINSUM, EinsumProducts, NumpyBackend
from chatlens.source import load_model

GAP = 0.01
LOGIT_TOL = 1e-3


def reference_model(model):
    """A transformers LlamaForCausalLM holding exactly our float32 weights."""
    ref = hf_model(model.config, model.weights.items())
    if model.config.tied_output:
        assert ref.lm_head.weight.data_ptr() == ref.model.embed_tokens.weight.data_ptr()
    return ref


@pytest.fixture(scope="module")
def model(gguf_path):
    return load_model(gguf_path)


@pytest.fixture(scope="module")
def reference(model):
    return reference_model(model)


def prefill_logits(backend, ids):
    backend.prefill(ids)
    return backend.last_logits()


def decode_logits(backend, token):
    backend.decode(token)
    return backend.last_logits()


def reference_logits(ref, ids):
    with torch.inference_mode():
        return ref(torch.tensor([ids])).logits[0].numpy()


def reference_greedy(ref, ids, n, eos_id):
    """Greedy ids and, for each step, the gap between the reference's two best logits."""
    with torch.inference_mode():
        out = ref.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False, eos_token_id=eos_id,
                           pad_token_id=eos_id, output_logits=True, return_dict_in_generate=True)
    new = out.sequences[0, len(ids):].tolist()
    gaps = [float(torch.topk(step[0], 2).values.diff().abs()) for step in out.logits]
    return new, gaps


def compare_greedy(ours, theirs, gaps):
    """Assert equality up to the first near-tie; return how many steps were compared."""
    for step, (a, b, gap) in enumerate(zip(ours, theirs, gaps)):
        if gap < GAP:
            return step
        assert a == b, f"step {step}: chatlens chose {a}, transformers {b} (top-2 gap {gap:.4f})"
    assert len(ours) == len(theirs)
    return len(ours)


def chat(text_side, messages):
    return text_side.tokenizer.encode(text_side.template.render(messages, add_generation_prompt=True))


LOGIT_PROMPTS = [
    "What is the capital of France?",
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
    "Les élèves ont répondu: 1234567 + 89 = ",
    "<|im_start|>user\nWho are you?<|im_end|>\n<|im_start|>assistant\n",
    "東京は日本の首都です。🙂 " * 20,
]


@pytest.mark.parametrize("text", LOGIT_PROMPTS)
def test_logits_match_transformers(model, reference, text):
    ids = model.tokenizer.encode(text)
    backend = model.backend(len(ids) + 4)
    ours = prefill_logits(backend, ids)
    theirs = reference_logits(reference, ids)
    np.testing.assert_allclose(ours, theirs[-1], atol=LOGIT_TOL, rtol=0)
    # the one-token decode path, fed the reference's next token
    following = [int(theirs[-1].argmax()), 13]
    full = reference_logits(reference, ids + following)
    for i, token in enumerate(following):
        np.testing.assert_allclose(decode_logits(backend, token), full[len(ids) + i], atol=LOGIT_TOL, rtol=0)


@pytest.mark.parametrize("text", [LOGIT_PROMPTS[0], LOGIT_PROMPTS[-1]], ids=["short", "long"])
def test_einsum_products_match_transformers(model, reference, text):
    """The products chosen for a NumPy without BLAS (einsum: Pyodide's), forced here: the same
    logits after a prefill (the long prompt reaches einsum's many-rows loop) and a decode step."""
    ids = model.tokenizer.encode(text)
    assert len(ids) >= EinsumProducts.ROWS_FOR_MULTIPLY_ADD or text is LOGIT_PROMPTS[0]
    backend = NumpyBackend(model.config, model.weights, len(ids) + 1, products=EINSUM)
    theirs = reference_logits(reference, ids + [13])
    np.testing.assert_allclose(prefill_logits(backend, ids), theirs[-2], atol=LOGIT_TOL, rtol=0)
    np.testing.assert_allclose(decode_logits(backend, 13), theirs[-1], atol=LOGIT_TOL, rtol=0)


LONG_TEXT = ("The history of computing is a story of abstraction layered on abstraction. "
             "Early machines were programmed with switches, then punched cards, then assembly. ") * 12

CHATS = [
    [{"role": "user", "content": "Hi!"}],
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "Who are you?"}],
    [{"role": "system", "content": "You are Captain Hook, a pirate. Always answer as a pirate would."}, {"role": "user", "content": "Who are you?"}],
    [{"role": "system", "content": "Today's date is 29 November 2026."}, {"role": "user", "content": "What year is it?"}],
    [{"role": "user", "content": "Hi! My name is Priya."}, {"role": "assistant", "content": "Hello Priya! How can I help you today?"},
     {"role": "user", "content": "Give me one tip for sleeping better."}],
    [{"role": "user", "content": "Write a Python function that reverses a string."}],
    [{"role": "user", "content": "List three fruits, numbered 1. 2. 3."}],
    [{"role": "user", "content": "Summarise this text in one sentence:\n\n" + LONG_TEXT + LONG_TEXT[:700]}],
    [{"role": "user", "content": "Translate to French: the cat sleeps on the warm windowsill."},
     {"role": "assistant", "content": "Le chat dort sur le rebord de fenêtre chaud."},
     {"role": "user", "content": "And to Spanish? " + LONG_TEXT[:900]}],
]


def test_chat_prompt_lengths_span_30_to_600(model):
    lengths = [len(chat(model.text, m)) for m in CHATS]
    assert min(lengths) >= 30 and max(lengths) <= 600 and max(lengths) > 300, lengths


GREEDY_TOKENS = 48  # a reply's first 48 tokens a chat: ten chats of 96 took 73 s of the test command's budget


@pytest.mark.parametrize("index", range(len(CHATS)))
def test_greedy_ids_match_transformers(model, reference, index):
    ids = chat(model.text, CHATS[index])
    ours = greedy(Pull(model.backend(len(ids) + GREEDY_TOKENS), ids, eos_id=model.eos_id, max_new_tokens=GREEDY_TOKENS))
    theirs, gaps = reference_greedy(reference, ids, GREEDY_TOKENS, model.eos_id)
    compared = compare_greedy(ours.ids, theirs, gaps)
    assert compared >= 8, f"only {compared} steps before a near-tie; pick a less ambiguous prompt"
    if compared == len(theirs):
        assert ours.stop_reason == ("end_turn" if theirs[-1] == model.eos_id else "max_tokens")


def test_truncated_cache_continues_like_a_fresh_one(model):
    a = model.tokenizer.encode("<|im_start|>system\nBe brief.<|im_end|>\n")
    b = model.tokenizer.encode("<|im_start|>user\nHello there<|im_end|>\n")
    c = model.tokenizer.encode("<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n")
    reused = model.backend(64)
    reused.prefill(a + b)
    reused.truncate(len(a))
    assert reused.length == len(a)
    fresh = model.backend(64)
    np.testing.assert_allclose(prefill_logits(reused, c), prefill_logits(fresh, a + c), atol=1e-4, rtol=0)


def test_cache_overflow_is_a_clear_error(model):
    from chatlens.errors import ChatlensError

    backend = model.backend(8)
    with pytest.raises(ChatlensError, match="holds 8 tokens"):
        backend.prefill(list(range(9)))


def test_generation_stops_at_end_of_turn_and_streams(model):
    ids = chat(model.text, [{"role": "user", "content": "Say only the word yes."}])
    streamed = []
    out = greedy(Pull(model.backend(len(ids) + 96), ids, eos_id=model.eos_id, max_new_tokens=96),
                 on_token=lambda chosen: streamed.append(chosen.id))
    assert out.stop_reason == "end_turn" and out.ids[-1] == model.eos_id and streamed == out.ids
    n = len(out.ids) - 1  # one short of the end of turn
    short = greedy(Pull(model.backend(len(ids) + n), ids, eos_id=model.eos_id, max_new_tokens=n))
    assert short.stop_reason == "max_tokens" and short.ids == out.ids[:n]


def test_exported_hf_folder_matches_transformers(hf_dir):
    """The folder from export-hf (bf16) loads in both, and both compute the same logits."""
    ours = load_model(hf_dir)
    ref = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
    ids = ours.tokenizer.encode("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n")
    np.testing.assert_allclose(prefill_logits(ours.backend(len(ids)), ids), reference_logits(ref, ids)[-1], atol=LOGIT_TOL, rtol=0)


def test_tiny_random_llama_of_another_shape(tmp_path, hf_dir):
    """Nothing is hard-coded: a random 2-layer Llama with other sizes, untied output, saved by transformers."""
    import shutil

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                   intermediate_size=96, vocab_size=49152, max_position_embeddings=256,
                                   rope_theta=5000.0, rms_norm_eps=1e-6, tie_word_embeddings=False,
                                   initializer_range=0.5, bos_token_id=1, eos_token_id=2)
    ref = transformers.LlamaForCausalLM(cfg).float().eval()
    ref.save_pretrained(tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(hf_dir / name, tmp_path / name)
    ours = load_model(tmp_path)
    assert ours.config.n_layers == 2 and ours.config.head_dim == 16 and not ours.config.tied_output
    ids = ours.tokenizer.encode("<|im_start|>user\nHello, tiny model! 12345<|im_end|>\n<|im_start|>assistant\n")
    np.testing.assert_allclose(prefill_logits(ours.backend(len(ids)), ids), reference_logits(ref, ids)[-1], atol=1e-4, rtol=0)
    out = greedy(Pull(ours.backend(len(ids) + 30), ids, eos_id=2, max_new_tokens=30))
    theirs, gaps = reference_greedy(ref, ids, 30, 2)
    assert compare_greedy(out.ids, theirs, gaps) >= 10

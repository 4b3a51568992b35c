"""`python -m chatlens bench`: prefill and decode speed and peak memory, chatlens against transformers.

Both run the same ~300-token chat prompt and exactly N new tokens (end of turn ignored, so
every run decodes the same number of steps) on the same float32 weights. The reference runs
in a child process so each side's peak memory is its own. Figures are medians of repeats:
this machine is noisy, so read the ratio, not the absolute numbers.
"""

import json
import resource
import statistics
import subprocess
import sys
import time

# A lesson-like conversation; its rendered prompt is about 300 tokens with SmolLM2's template.
CONVERSATION = [
    {"role": "system", "content": "You are a patient tutor who explains how language models read text. Keep answers short and concrete."},
    {"role": "user", "content": "Hi! My name is Priya. I am learning how chat models work and I would like to understand what the model actually sees when I send a message."},
    {"role": "assistant", "content": "Nice to meet you, Priya! Every time you send a message, the app renders the whole conversation into one long text with special tokens that mark who is speaking, then the model reads that text token by token."},
    {"role": "user", "content": "So the model does not remember earlier turns by itself? What happens when the conversation becomes longer than the context window of 2048 tokens?"},
    {"role": "assistant", "content": "Right, it has no memory of its own. When the text no longer fits, the app drops the oldest turns, keeps the system prompt and your newest message, and leaves room for the reply."},
    {"role": "user", "content": "And what is the key-value cache? I read that it makes the second turn of a chat faster than the first."},
    {"role": "assistant", "content": "While the model reads a prompt it computes keys and values for every token. The app keeps them, so on the next turn only the new tokens after the longest common prefix need computing."},
    {"role": "user", "content": "Give me one tip for sleeping better, and then explain in two sentences why dropping an old turn means less of the cache can be reused."},
]


def prompt_ids(text_side) -> list:
    rendered = text_side.template.render(CONVERSATION, add_generation_prompt=True)
    return text_side.tokenizer.encode(rendered)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def run_chatlens(model, ids, new_tokens, repeats):
    prefill, decode = [], []
    backend = model.backend(len(ids) + new_tokens)
    for _ in range(repeats):
        backend.reset()
        t0 = time.perf_counter()
        step = backend.prefill(ids)
        t1 = time.perf_counter()
        for _ in range(new_tokens - 1):
            step = backend.decode(step.id)
        t2 = time.perf_counter()
        prefill.append(len(ids) / (t1 - t0))
        decode.append((new_tokens - 1) / (t2 - t1))
    return {"prefill_tok_s": statistics.median(prefill), "decode_tok_s": statistics.median(decode), "peak_mb": peak_mb(),
            "backend": backend.name}


def reference_model(config, tensors):
    """A transformers LlamaForCausalLM of `config` (float32) holding `tensors`: (HF name, array)
    pairs, copied in one at a time so only one extra tensor is alive at once."""
    import torch
    import transformers

    cfg = {k: v for k, v in config.to_hf().items() if k not in ("architectures", "torch_dtype")}
    ref = transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg)).float().eval()
    params, loaded = ref.state_dict(), set()
    with torch.no_grad():
        for name, array in tensors:
            params[name].copy_(torch.from_numpy(array))
            loaded.add(name)
    missing = set(params) - loaded - ({"lm_head.weight"} if config.tied_output else set())
    if missing:
        raise ValueError(f"reference model: no weights for {sorted(missing)[:5]}")
    return ref


def run_reference(model_path, ids, new_tokens, repeats):
    """transformers float32 on the same weights, streamed from the model file."""
    import torch

    from ..gguf import GGUFFile, hf_tensors
    from ..source import load_text_side

    config = load_text_side(model_path).config
    if model_path.is_dir():
        from .. import safetensors

        tensors = (item for f in sorted(model_path.glob("*.safetensors")) for item in safetensors.load(f).items())
    else:
        tensors = hf_tensors(GGUFFile(model_path), config.n_heads, config.n_kv_heads)
    ref = reference_model(config, tensors)
    prefill, decode = [], []
    x = torch.tensor([ids])
    with torch.inference_mode():
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = ref(x, use_cache=True)
            t1 = time.perf_counter()
            past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
            for _ in range(new_tokens - 1):
                out = ref(token, past_key_values=past, use_cache=True)
                past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
            t2 = time.perf_counter()
            prefill.append(len(ids) / (t1 - t0))
            decode.append((new_tokens - 1) / (t2 - t1))
    return {"prefill_tok_s": statistics.median(prefill), "decode_tok_s": statistics.median(decode), "peak_mb": peak_mb(),
            "torch": torch.__version__, "threads": torch.get_num_threads()}


def main(args) -> int:
    from .fetch import resolve_model
    from .models import open_model

    path = resolve_model(args.model)
    if getattr(args, "reference_child", False):
        ids = json.loads(sys.stdin.read())
        print(json.dumps(run_reference(path, ids, args.new_tokens, args.repeats)))
        return 0
    model = open_model(path, args.backend)
    ids = prompt_ids(model.text)
    print(f"prompt: {len(ids)} tokens, {args.new_tokens} new tokens, median of {args.repeats} runs, model {path.name}")
    ours = run_chatlens(model, ids, args.new_tokens, args.repeats)
    _row(f"chatlens ({ours['backend']})", ours)
    if args.no_reference:
        return 0
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("transformers is not installed: no reference run")
        return 0
    child = subprocess.run(
        [sys.executable, "-m", "chatlens",
         "bench", "--model", str(path), "--new-tokens", str(args.new_tokens), "--repeats", str(args.repeats), "--reference-child"],
        input=json.dumps(ids), capture_output=True, text=True)
    if child.returncode != 0:
        print("reference run failed:\n" + child.stderr[-2000:])
        return 1
    ref = json.loads(child.stdout.strip().splitlines()[-1])
    _row(f"transformers {ref['torch']} f32", ref)
    print(f"ratio chatlens/transformers: prefill {ours['prefill_tok_s'] / ref['prefill_tok_s']:.2f}x, "
          f"decode {ours['decode_tok_s'] / ref['decode_tok_s']:.2f}x, peak memory {ours['peak_mb'] / ref['peak_mb']:.2f}x")
    return 0


def _row(name, r):
    print(f"{name:28s} prefill {r['prefill_tok_s']:7.1f} tok/s   decode {r['decode_tok_s']:6.1f} tok/s   peak {r['peak_mb']:7.0f} MB")

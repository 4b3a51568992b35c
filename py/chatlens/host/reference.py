"""The reference the fidelity tests and the benchmark compare against: transformers' own Llama
on exactly the weights chatlens computes with. Host only: torch and transformers are imported
when it is called, so a command that never compares does not load them.
"""


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

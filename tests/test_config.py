"""ModelConfig: read from the model's own metadata, and refusing what the forward pass cannot compute."""

import pytest

from chatlens.config import ModelConfig
from chatlens.errors import ModelFormatError
from chatlens.gguf import GGUFFile

BASE = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 100, "max_position_embeddings": 128}


def test_gguf_config_matches_transformers_reading_of_the_same_file(gguf_path):
    from transformers import AutoConfig

    ref = AutoConfig.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    g = GGUFFile(gguf_path)
    ours = ModelConfig.from_gguf(g.metadata, g.tensors)
    assert (ours.n_layers, ours.dim, ours.n_heads, ours.n_kv_heads, ours.ffn_dim, ours.vocab_size, ours.n_ctx) == \
        (ref.num_hidden_layers, ref.hidden_size, ref.num_attention_heads, ref.num_key_value_heads,
         ref.intermediate_size, ref.vocab_size, ref.max_position_embeddings)
    assert ours.head_dim == ref.hidden_size // ref.num_attention_heads
    ref_theta = ref.rope_parameters["rope_theta"] if getattr(ref, "rope_parameters", None) else ref.rope_theta
    assert ours.rope_base == ref_theta
    assert ours.norm_eps == pytest.approx(ref.rms_norm_eps, rel=1e-6)
    assert ours.tied_output  # no output.weight in the file


def test_hf_config_round_trip():
    cfg = ModelConfig.from_hf({**BASE, "rope_theta": 5000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": False})
    assert cfg.head_dim == 16 and cfg.rope_base == 5000.0 and not cfg.tied_output
    assert ModelConfig.from_hf(cfg.to_hf()) == cfg
    # transformers 5 writes rope_theta inside rope_parameters
    assert ModelConfig.from_hf({**BASE, "rope_parameters": {"rope_type": "default", "rope_theta": 7.0}}).rope_base == 7.0


@pytest.mark.parametrize("change, message", [
    ({"hidden_act": "gelu"}, "activation"),
    ({"attention_bias": True}, "biases"),
    ({"mlp_bias": True}, "biases"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, "RoPE scaling"),
    ({"num_attention_heads": 0}, "n_heads must be a positive integer"),
    ({"num_key_value_heads": 3}, "cannot be grouped"),
    ({"model_type": "gpt2"}, "only llama"),
])
def test_hf_config_refuses_what_the_forward_pass_cannot_compute(change, message):
    with pytest.raises(ModelFormatError, match=message):
        ModelConfig.from_hf({**BASE, **change})


def test_missing_key_is_named():
    cfg = dict(BASE)
    del cfg["intermediate_size"]
    with pytest.raises(ModelFormatError, match="intermediate_size"):
        ModelConfig.from_hf(cfg)


def test_gguf_rope_scaling_refused(gguf_path):
    g = GGUFFile(gguf_path)
    meta = {**g.metadata, "llama.rope.scaling.type": "yarn"}
    with pytest.raises(ModelFormatError, match="RoPE scaling"):
        ModelConfig.from_gguf(meta, g.tensors)


@pytest.mark.parametrize("key, value", [
    ("llama.embedding_length", "576"), ("llama.attention.layer_norm_rms_epsilon", "tiny"),
    ("llama.rope.freq_base", [1, 2]), ("llama.attention.layer_norm_rms_epsilon", 1e400),
    ("llama.block_count", 2.5), ("llama.context_length", None),
])
def test_gguf_metadata_of_the_wrong_type_is_a_model_format_error(gguf_path, key, value):
    """A broken or hostile file's metadata (a string for a count, a list for a float) is refused
    as the model's fault, never as a TypeError from inside the reader."""
    g = GGUFFile(gguf_path)
    meta = {**g.metadata, key: value}
    with pytest.raises(ModelFormatError):
        ModelConfig.from_gguf(meta, g.tensors)

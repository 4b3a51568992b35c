"""The model's shape, read from its own metadata: GGUF `{arch}.*` keys or a Hugging Face config.json."""

import struct
from dataclasses import asdict, dataclass

from .errors import ModelFormatError


@dataclass(frozen=True)
class ModelConfig:
    n_layers: int
    dim: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_dim: int
    vocab_size: int
    n_ctx: int
    rope_base: float
    norm_eps: float
    tied_output: bool

    def __post_init__(self):
        for name in ("n_layers", "dim", "n_heads", "n_kv_heads", "head_dim", "ffn_dim", "vocab_size", "n_ctx"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ModelFormatError(f"model config: {name} must be a positive integer, not {value!r}")
        if self.n_heads % self.n_kv_heads:
            raise ModelFormatError(f"{self.n_heads} attention heads cannot be grouped over {self.n_kv_heads} KV heads")
        if self.head_dim % 2:
            raise ModelFormatError(f"head dimension {self.head_dim} is odd; RoPE needs pairs")
        for name in ("rope_base", "norm_eps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise ModelFormatError(f"model config: {name} must be a positive finite number, not {value!r}")

    def tensors(self) -> dict:
        """The one tensor table: every weight this Llama holds, by Hugging Face name, with its
        shape. The NumPy path, the GPU program and the readers check a model against it
        (`check_tensors`)."""
        q_dim, kv_dim = self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
        want = {"model.embed_tokens.weight": (self.vocab_size, self.dim), "model.norm.weight": (self.dim,)}
        if not self.tied_output:
            want["lm_head.weight"] = (self.vocab_size, self.dim)
        for i in range(self.n_layers):
            p = f"model.layers.{i}."
            want.update({
                p + "input_layernorm.weight": (self.dim,),
                p + "post_attention_layernorm.weight": (self.dim,),
                p + "self_attn.q_proj.weight": (q_dim, self.dim),
                p + "self_attn.k_proj.weight": (kv_dim, self.dim),
                p + "self_attn.v_proj.weight": (kv_dim, self.dim),
                p + "self_attn.o_proj.weight": (self.dim, q_dim),
                p + "mlp.gate_proj.weight": (self.ffn_dim, self.dim),
                p + "mlp.up_proj.weight": (self.ffn_dim, self.dim),
                p + "mlp.down_proj.weight": (self.dim, self.ffn_dim),
            })
        return want

    def check_tensors(self, shapes: dict, where) -> None:
        """Refuse a model whose tensors (name -> shape) are not the table's: one missing, one of
        another shape, or one this forward pass has no place for (a bias, say: ignored, it would
        compute silently wrong). A tied model's spare lm_head is allowed. The same sentences on
        every path."""
        want = self.tensors()
        unexpected = set(shapes) - set(want) - {"lm_head.weight"}
        if unexpected:
            raise ModelFormatError(f"{where}: weights this Llama has no place for: {', '.join(sorted(unexpected)[:5])}")
        for name, shape in want.items():
            if name not in shapes:
                raise ModelFormatError(f"{where}: weight {name} is missing")
            if tuple(shapes[name]) != shape:
                raise ModelFormatError(f"{where}: weight {name} has shape {tuple(shapes[name])}, the config implies {shape}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_gguf(cls, meta: dict, tensor_names) -> "ModelConfig":
        try:
            return cls._from_gguf(meta, tensor_names)
        except (TypeError, ValueError, OverflowError, struct.error) as e:
            # A hostile or broken file: metadata of the wrong type (a string for a count, ...).
            raise ModelFormatError(f"GGUF metadata of the wrong type: {e}") from None

    @classmethod
    def _from_gguf(cls, meta: dict, tensor_names) -> "ModelConfig":
        arch = meta.get("general.architecture")
        if arch != "llama":
            raise ModelFormatError(f"architecture {arch!r} is not supported (only llama)")

        def get(key, default=None):
            value = meta.get(f"{arch}.{key}", default)
            if value is None:
                raise ModelFormatError(f"GGUF metadata lacks {arch}.{key}")
            return value

        scaling = meta.get(f"{arch}.rope.scaling.type", "none")
        if scaling != "none" and not (scaling == "linear" and meta.get(f"{arch}.rope.scaling.factor", 1.0) == 1.0):
            raise ModelFormatError(f"RoPE scaling {scaling!r} is not supported")
        dim, n_heads = get("embedding_length"), get("attention.head_count")
        vocab = meta.get(f"{arch}.vocab_size") or len(meta.get("tokenizer.ggml.tokens", ()))
        head_dim = meta.get(f"{arch}.attention.key_length") or meta.get(f"{arch}.rope.dimension_count")
        return cls(
            n_layers=get("block_count"), dim=dim, n_heads=n_heads,
            n_kv_heads=get("attention.head_count_kv", n_heads),
            head_dim=head_dim or (dim // n_heads if n_heads else 0),
            ffn_dim=get("feed_forward_length"), vocab_size=vocab, n_ctx=get("context_length"),
            rope_base=float(get("rope.freq_base", 10000.0)),
            norm_eps=_f32_shortest(get("attention.layer_norm_rms_epsilon")),
            tied_output="output.weight" not in tensor_names,
        )

    @classmethod
    def from_hf(cls, cfg: dict) -> "ModelConfig":
        if cfg.get("model_type", "llama") != "llama":
            raise ModelFormatError(f"model_type {cfg.get('model_type')!r} is not supported (only llama)")
        rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
        if rope.get("rope_type", rope.get("type", "default")) != "default":
            raise ModelFormatError(f"RoPE scaling {rope!r} is not supported")
        # What this forward pass computes: SiLU MLP, no biases. Anything else would load and be wrong.
        if cfg.get("hidden_act", "silu") != "silu":
            raise ModelFormatError(f"activation {cfg['hidden_act']!r} is not supported (only silu)")
        if cfg.get("attention_bias") or cfg.get("mlp_bias"):
            raise ModelFormatError("Llama variants with attention or MLP biases are not supported")
        try:
            n_heads = cfg["num_attention_heads"]
            return cls(
                n_layers=cfg["num_hidden_layers"], dim=cfg["hidden_size"], n_heads=n_heads,
                n_kv_heads=cfg.get("num_key_value_heads") or n_heads,
                head_dim=cfg.get("head_dim") or (cfg["hidden_size"] // n_heads if n_heads else 0),
                ffn_dim=cfg["intermediate_size"], vocab_size=cfg["vocab_size"],
                n_ctx=cfg.get("max_position_embeddings", 2048),
                rope_base=float(cfg.get("rope_theta", rope.get("rope_theta", 10000.0))),
                norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
                tied_output=bool(cfg.get("tie_word_embeddings", False)),
            )
        except KeyError as e:
            raise ModelFormatError(f"config.json lacks {e.args[0]}") from None

    def to_hf(self) -> dict:
        """A transformers LlamaConfig dict for this shape."""
        return {
            "architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "num_hidden_layers": self.n_layers, "hidden_size": self.dim,
            "num_attention_heads": self.n_heads, "num_key_value_heads": self.n_kv_heads,
            "head_dim": self.head_dim, "intermediate_size": self.ffn_dim, "vocab_size": self.vocab_size,
            "max_position_embeddings": self.n_ctx, "rope_theta": self.rope_base,
            "rms_norm_eps": self.norm_eps, "tie_word_embeddings": self.tied_output,
            "hidden_act": "silu", "attention_bias": False, "mlp_bias": False, "torch_dtype": "bfloat16",
        }


def _f32_shortest(x: float) -> float:
    """GGUF stores epsilon as float32 (1e-5 reads back as 9.9999997e-06): take the shortest
    decimal that rounds to the same float32, which is what the original config said."""
    f32 = struct.unpack("<f", struct.pack("<f", x))[0]
    for digits in range(1, 10):
        candidate = float(f"{f32:.{digits}g}")
        if struct.unpack("<f", struct.pack("<f", candidate))[0] == f32:
            return candidate
    return f32

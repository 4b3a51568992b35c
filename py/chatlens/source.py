"""Where a model comes from: a GGUF file or a Hugging Face folder, behind one loader.

`load_text_side` reads only the small parts (tokenizer, chat template, config) and needs no
NumPy, so the browser can render and count prompts before any weights are downloaded.
`load_model` adds the weights as float32 arrays under Hugging Face names.
"""

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from .config import ModelConfig
from .errors import ModelFormatError, TemplateError

@dataclass
class TextSide:
    tokenizer: object
    template: object
    config: ModelConfig
    eos_id: int  # the end-of-turn token that stops a reply
    metadata: dict | None = None  # a GGUF's metadata (None for a Hugging Face folder)

    @property
    def eos_token(self) -> str:
        return self.tokenizer.token_text(self.eos_id)


class MissingTemplate:
    """The chat template of a model that has none: a base model (SmolLM2-135M, pretrained only)
    continues text and has no chat layout of its own. Any use of it says so in a sentence; the
    comparison (chatlens.compare) reads such a model with the instruct model's template instead."""
    source = None

    def __init__(self, where):
        self.where = str(where)

    def __getattr__(self, name):  # only for what a real ChatTemplate has and this lacks
        if name.startswith("__"):
            raise AttributeError(name)
        raise TemplateError(f"{self.where} has no chat template (a base model, pretrained only): it can continue "
                            "plain text, but not render a conversation")


def resolve_path(path) -> Path:
    """The model path, checked to exist. (The command line fills in the default model.)"""
    if path is None:
        raise ModelFormatError("no model given: a .gguf file or a Hugging Face folder")
    path = Path(path)
    if not path.exists():
        raise ModelFormatError(f"{path}: no such model file or folder")
    return path


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelFormatError(f"{path.parent}: a Hugging Face model folder needs {path.name}") from None
    except ValueError as e:
        raise ModelFormatError(f"{path}: not valid JSON: {e}") from None


def load_text_side(path, clock=None) -> TextSide:
    path = resolve_path(path)
    if path.is_dir():
        return _folder_text_side(path, clock)
    from .gguf import GGUFFile

    return _gguf_text_side(GGUFFile(path), clock)


def load_config(path) -> ModelConfig:
    """The model's config alone (its context, its shapes): what a command checks its settings
    against before it loads anything larger."""
    path = resolve_path(path)
    if path.is_dir():
        return ModelConfig.from_hf(_read_json(path / "config.json"))
    from .gguf import GGUFFile

    gguf = GGUFFile(path)
    return ModelConfig.from_gguf(gguf.metadata, gguf.tensors)


def _folder_text_side(path: Path, clock) -> TextSide:
    from .template import ChatTemplate
    from .tokenizer import Tokenizer

    tokenizer_config = _read_json(path / "tokenizer_config.json")
    tok = Tokenizer.from_json(_read_json(path / "tokenizer.json"))
    template = (ChatTemplate.from_tokenizer_config(tokenizer_config, clock=clock)
                if tokenizer_config.get("chat_template") is not None else MissingTemplate(path))
    config = ModelConfig.from_hf(_read_json(path / "config.json"))
    gen = path / "generation_config.json"
    eos = _read_json(gen).get("eos_token_id") if gen.exists() else None
    if eos is None:  # as transformers does: tokenizer_config.json's eos_token ("<|im_end|>" or {"content": ...})
        named = tokenizer_config.get("eos_token")
        named = named.get("content") if isinstance(named, dict) else named
        eos = tok.id_of(named) if isinstance(named, str) else None
    return TextSide(tok, template, config, _end_of_turn(eos, tok, path))


def _gguf_text_side(gguf, clock) -> TextSide:
    from .template import ChatTemplate
    from .tokenizer import Tokenizer

    tok = Tokenizer.from_gguf(gguf.metadata)
    has = any(isinstance(k, str) and k.startswith("tokenizer.chat_template") for k in gguf.metadata)
    template = ChatTemplate.from_gguf(gguf.metadata, clock=clock) if has else MissingTemplate(gguf.path)
    config = ModelConfig.from_gguf(gguf.metadata, gguf.tensors)
    eos = gguf.metadata.get("tokenizer.ggml.eos_token_id")
    return TextSide(tok, template, config, _end_of_turn(eos, tok, gguf.path), gguf.metadata)


def _end_of_turn(eos, tok, where) -> int:
    if isinstance(eos, list):  # generation_config.json may list several
        eos = eos[0] if eos else None
    if eos is None:
        eos = tok.eos_token_id
    if eos is None:
        raise ModelFormatError(f"{where}: the model names no end-of-turn token")
    return eos


class Model:
    """A loaded model: its text side, where it came from, and how to make a backend for it.

    weights: float32 arrays under Hugging Face names and layout, for the NumPy backend; None
    when another backend reads the file itself (backend_factory(n_ctx) then makes it)."""

    def __init__(self, path, text: TextSide, weights: dict | None = None, backend_factory=None):
        self.path, self.text, self.weights = Path(path), text, weights
        self.config, self.tokenizer, self.template, self.eos_id = text.config, text.tokenizer, text.template, text.eos_id
        self.name = self.path.name
        self._backend_factory = backend_factory
        if weights is not None:
            _check_weights(weights, self.config, self.path)
        elif backend_factory is None:
            raise ValueError("a Model needs weights or a backend factory")

    @cached_property
    def sha256(self) -> str | None:
        if self.path.is_dir():
            return None
        import hashlib

        h = hashlib.sha256()  # of the file as it is now, not as it was fetched
        with open(self.path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()

    def backend(self, n_ctx: int | None = None):
        """A new backend with an empty cache for n_ctx tokens (default: the model's context)."""
        n_ctx = n_ctx or self.config.n_ctx
        if self._backend_factory is not None:
            return self._backend_factory(n_ctx)
        from .model import NumpyBackend

        return NumpyBackend(self.config, self.weights, n_ctx)


def load_model(path, clock=None) -> Model:
    path = resolve_path(path)
    if path.is_dir():
        from . import safetensors

        text = _folder_text_side(path, clock)
        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise ModelFormatError(f"{path}: no .safetensors weights in the folder")
        weights = {}
        for f in files:
            weights.update(safetensors.load(f))
    else:
        from .gguf import GGUFFile, hf_state_dict

        gguf = GGUFFile(path)
        text = _gguf_text_side(gguf, clock)
        weights = hf_state_dict(gguf, text.config.n_heads, text.config.n_kv_heads)
    return Model(path, text, weights)


def _check_weights(weights: dict, cfg: ModelConfig, where):
    cfg.check_tensors({name: w.shape for name, w in weights.items()}, where)

"""A stand-in for the base model, SmolLM2-135M, made from files this machine has.

The Hub (where the real base model is) cannot be reached here. The comparison (chatlens.compare)
needs a second model with the instruct model's tokenizer and shapes but other weights, whose
tokenizer_config.json is the base model's kind: no chat template, <|endoftext|> as its bos and
eos. The stand-in is the instruct model's Hugging Face export (`python -m chatlens export-hf`, as
the mirror caches it) with every matrix multiplied element by element by 1 + NOISE * N(0, 1) from
a seeded generator, stored as bf16 like the real file. It is not the base model: its replies are
the instruct model's, disturbed. Its README.md says so, and the mirror and the recordings read
that.

`standin_base()` writes it once into $CHATLENS_HOME/standin/ (outside the checkout, beside the
mirror's export) and returns the folder; `mismatched_tokenizer(out)` a copy whose tokenizer lacks
one merge, for the refusal test.
"""

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from chatlens import safetensors
from chatlens.host.export import save_safetensors

SEED = 135  # any fixed seed: the stand-in is the same bytes on every machine
NOISE = 0.05  # relative: the chat-template reply differs from the instruct model's, and still reads as words
VERSION = 1  # bump when the recipe changes: the cache folder's name carries it
ENDOFTEXT = "<|endoftext|>"
README = """# A stand-in for HuggingFaceTB/SmolLM2-135M (NOT the base model)

Made by chatlens's tests/standin_base.py because the Hugging Face Hub cannot be reached here.
It is SmolLM2-135M-Instruct's 4-bit GGUF exported to a Hugging Face folder (`python -m chatlens
export-hf`), every matrix multiplied element by element by 1 + {noise} * N(0, 1) (NumPy
default_rng({seed}), tensors in name order), stored as bf16. tokenizer.json is the instruct
model's, unchanged; tokenizer_config.json has no chat template and names {eos} as bos and eos,
as the real base model's does. Its replies are the instruct model's, disturbed: they show the
machinery of the comparison, never what pretraining alone writes.
"""


def write_standin(out: Path, instruct_folder: Path, *, seed=SEED, noise=NOISE) -> Path:
    """Write the stand-in into `out` from the instruct model's Hugging Face folder."""
    instruct_folder, out = Path(instruct_folder), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    weights = safetensors.load(instruct_folder / "model.safetensors")
    rng = np.random.default_rng(seed)
    for name in sorted(weights):
        w = weights[name]
        if w.ndim == 2:
            weights[name] = w * (1 + noise * rng.standard_normal(w.shape, dtype=np.float32))
    save_safetensors(weights, out / "model.safetensors", dtype="BF16", metadata={"format": "pt"})
    del weights
    shutil.copy(instruct_folder / "tokenizer.json", out / "tokenizer.json")
    tok = json.loads((instruct_folder / "tokenizer.json").read_text(encoding="utf-8"))
    end = next(t["id"] for t in tok["added_tokens"] if t["content"] == ENDOFTEXT)
    config = json.loads((instruct_folder / "config.json").read_text(encoding="utf-8"))
    config.update({"bos_token_id": end, "eos_token_id": end})
    _write(out / "config.json", config)
    _write(out / "generation_config.json", {"bos_token_id": end, "eos_token_id": end})
    tc = json.loads((instruct_folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    tc.pop("chat_template", None)
    tc.update({"bos_token": ENDOFTEXT, "eos_token": ENDOFTEXT, "unk_token": ENDOFTEXT})
    _write(out / "tokenizer_config.json", tc)
    (out / "README.md").write_text(README.format(noise=noise, seed=seed, eos=ENDOFTEXT), encoding="utf-8")
    return out


def instruct_folder() -> Path:
    """The instruct model's Hugging Face export, as the mirror caches it (made on first use)."""
    from chatlens.host.mirror import prepare_mirror

    return prepare_mirror(quiet=True).files["config.json"].parent


def standin_base(source: Path | None = None) -> Path:
    """The stand-in's folder, written once into $CHATLENS_HOME/standin/ and reused."""
    from chatlens.host import fetch

    source = Path(source) if source is not None else instruct_folder()
    folder = fetch.home() / "standin" / f"SmolLM2-135M-standin-v{VERSION}-{source.name}"
    if (folder / "README.md").exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        part = write_standin(Path(tmp) / "standin", source)
        if not (folder / "README.md").exists():  # else another process finished first
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(part, folder)
    return folder


def mismatched_tokenizer(out: Path, folder: Path | None = None) -> Path:
    """A copy of the stand-in (its weights linked, not copied) whose tokenizer.json lacks its first
    merge: another tokenizer, the ids of some text differ."""
    folder = Path(folder) if folder is not None else standin_base()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for p in folder.iterdir():
        if p.name == "model.safetensors":
            (out / p.name).symlink_to(p.resolve())
        elif p.name != "tokenizer.json":
            shutil.copy(p, out / p.name)
    tok = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    del tok["model"]["merges"][0]
    _write(out / "tokenizer.json", tok)
    return out


def _write(path: Path, data):
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")

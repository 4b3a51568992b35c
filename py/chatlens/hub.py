"""The two models' original files on the Hugging Face Hub, pinned: the one definition of where the
instruct model and the base model come from and how their bytes are checked.

The build writes these into build.json (`models`), so the page downloads from the same pins; the
host's mirror serves local copies under the same repo names. Plain data: no imports, runs in
Pyodide as it is.

Where a sha256 comes from: the Hub cannot be reached from the machines this was written on, so
every value here is one that public code pinning the same revision publishes, and several
independent projects agree on each (for the base: fetch scripts, reproducibility receipts and
model manifests in unrelated repositories all pin revision 93efa2f0 of HuggingFaceTB/SmolLM2-135M
with model.safetensors 80521b40..., config.json 1d556eab..., tokenizer.json 9ca9acdd... and
tokenizer_config.json 4bb9af56...; two full file inventories of that revision add
generation_config.json 2056c988..., 111 bytes). A file with no published value has no "sha256":
the store hashes it on arrival and says it was not verified against a published value.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class HubModel:
    key: str  # "instruct" or "base": the name the page, the worker and the mirror's manifest use
    repo: str
    revision: str  # a commit of the repo's main branch, never a branch name
    files: tuple  # ({"name", "sha256"?, "size"?, "optional"?}, ...): what the browser stores
    verified: str  # one sentence for the model box: how the files are verified

    def file(self, name) -> dict | None:
        return next((f for f in self.files if f["name"] == name), None)

    def for_page(self) -> dict:
        """build.json's models[key]."""
        return {"repo": self.repo, "revision": self.revision, "files": [dict(f) for f in self.files],
                "verified": self.verified}


INSTRUCT = HubModel(
    key="instruct",
    repo="HuggingFaceTB/SmolLM2-135M-Instruct",
    revision="12fd25f77366fa6b3b4b768ec3050bf629380bac",
    files=(
        {"name": "config.json"},
        {"name": "generation_config.json", "optional": True},
        {"name": "tokenizer.json", "sha256": "9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c"},
        {"name": "tokenizer_config.json"},
        {"name": "model.safetensors", "sha256": "5af571cbf074e6d21a03528d2330792e532ca608f24ac70a143f6b369968ab8c"},
    ),
    verified=("model.safetensors and tokenizer.json are checked against the sha256 that public code pinning this "
              "revision publishes; the small JSON files have no published value and are only hashed on arrival."),
)

BASE = HubModel(
    key="base",
    repo="HuggingFaceTB/SmolLM2-135M",
    revision="93efa2f097d58c2a74874c7e644dbc9b0cee75a2",
    files=(
        {"name": "config.json", "size": 704,
         "sha256": "1d556eab73b69c7f11f64c557a2f9c6f440bd4c6b89bb2584a6b498c92603843"},
        {"name": "generation_config.json", "size": 111, "optional": True,
         "sha256": "2056c988e990b0d13670f63f2f3b87b3b6d07edaf7a3416998ba27dab2d8a059"},
        # The same file as the instruct model's: both models read the same ids (chatlens.compare).
        {"name": "tokenizer.json", "size": 2104556,
         "sha256": "9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c"},
        # No chat template in it, and its bos and eos are <|endoftext|>: a pretrained model only.
        {"name": "tokenizer_config.json", "size": 3658,
         "sha256": "4bb9af56a342753d39374f4016a16574cab299fe088e896f425ce3c433f61424"},
        {"name": "model.safetensors", "size": 269060552,
         "sha256": "80521b40281d6ce74e35c9282c22539e75aa0ac8578892b2a59955ef78d55da1"},
    ),
    verified=("Every file is checked against the sha256 (and size) that public code pinning this revision "
              "publishes, values on which several independent projects agree."),
)

MODELS = {m.key: m for m in (INSTRUCT, BASE)}


def for_page() -> dict:
    """build.json's "models": {"instruct": ..., "base": ...}."""
    return {key: m.for_page() for key, m in MODELS.items()}

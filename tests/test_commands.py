"""The engine's command line: fetch, export-hf, tokenize, generate, bench.

Each command runs at least once in a process of its own (run_cli); its refusals of bad input run
the same command line in pytest's process (cli_in_process)."""

import json

import pytest
from tokenizers import Tokenizer as HFTokenizer

from chatlens.host import fetch
from conftest import cli_in_process, run_cli as chatlens


def test_fetch_is_a_no_op_when_cached(gguf_path):
    done = chatlens("fetch", env={"CHATLENS_HOME": str(gguf_path.parent)})
    assert done.returncode == 0 and done.stdout.strip() == str(gguf_path)
    assert "downloading" not in done.stderr
    assert fetch.sha256_of(gguf_path) == fetch.SHA256


def test_export_hf_writes_a_hub_style_folder(hf_dir):
    names = {p.name for p in hf_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"} <= names
    config = json.loads((hf_dir / "config.json").read_text())
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 30 and config["rms_norm_eps"] == 1e-05
    header_len = int.from_bytes((hf_dir / "model.safetensors").read_bytes()[:8], "little")
    header = json.loads((hf_dir / "model.safetensors").read_bytes()[8:8 + header_len])
    assert {t["dtype"] for k, t in header.items() if k != "__metadata__"} == {"BF16"}
    tok = json.loads((hf_dir / "tokenizer.json").read_text())
    assert [p["type"] for p in tok["pre_tokenizer"]["pretokenizers"]] == ["Digits", "ByteLevel"]
    assert "<|im_start|>" in json.loads((hf_dir / "tokenizer_config.json").read_text())["chat_template"]


TEXTS = ["Hello world", "In 2026, 1234567 digits\n\n1. first", "<|im_start|>user\nhi<|im_end|>\n", "émoji 🙂👍🏽 東京"]


@pytest.mark.parametrize("model_arg", ["gguf", "hf"])
def test_tokenize_matches_hf_tokenizers(gguf_path, hf_dir, tokenizer_json, model_arg):
    reference = HFTokenizer.from_file(str(tokenizer_json))
    model = str(gguf_path if model_arg == "gguf" else hf_dir)
    done = chatlens("tokenize", "--model", model, stdin=TEXTS[1])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == reference.encode(TEXTS[1], add_special_tokens=False).ids
    done = cli_in_process("tokenize", "--jsonl", "--model", model, stdin="".join(json.dumps(t) + "\n" for t in TEXTS))
    assert [json.loads(line) for line in done.stdout.splitlines()] == \
        [reference.encode(t, add_special_tokens=False).ids for t in TEXTS]


def test_generate_prints_ids_stop_reason_and_top5(model):
    from chatlens.pull import Pull, greedy

    ids = model.tokenizer.encode("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n")
    done = chatlens("generate", "--max-new-tokens", "12", stdin=json.dumps(ids))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    backend = model.backend(len(ids) + 12)
    expected = greedy(Pull(backend, ids[:-1] + ids[-1:], eos_id=model.eos_id, max_new_tokens=12))
    assert out["ids"] == expected.ids and out["stop_reason"] == expected.stop_reason and out["backend"] == "numpy"
    backend.reset()
    backend.prefill(ids)
    first = backend.last_logits()
    top = sorted(range(len(first)), key=lambda i: -first[i])[:5]
    assert [i for i, _ in out["top5"]] == top
    assert [logit for _, logit in out["top5"]] == pytest.approx([float(first[i]) for i in top])


@pytest.mark.parametrize("stdin, args, message", [
    ("not json", [], "JSON array"), ("[]", [], "non-empty"), ("[1, 99999999]", [], "out of range"),
    ("[1, true]", [], "token ids"), ("[1, 2]", ["--max-new-tokens", "-5"], "at least 1"),
    ("[1]", ["--max-new-tokens", "9000"], "exceed the model's context of 8192"),
])
def test_generate_rejects_bad_input(stdin, args, message):
    done = cli_in_process("generate", *args, stdin=stdin)
    assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("stdin, message", [("not json\n", "line 1 is not JSON"), ('"ok"\n5\n', "line 2 must be a JSON string")])
def test_tokenize_jsonl_rejects_bad_lines(stdin, message):
    done = cli_in_process("tokenize", "--jsonl", stdin=stdin)
    assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr


def test_malformed_model_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 8)
    done = cli_in_process("tokenize", "--model", str(bad), stdin="hi")
    assert done.returncode == 1 and "chatlens:" in done.stderr and "Traceback" not in done.stderr


def test_bench_prints_figures(gguf_path):
    from chatlens.host import bench

    done = chatlens("bench", "--no-reference", "--numpy", "1", "--new-tokens", "4", "--repeats", "1", "--json")
    assert done.returncode == 0, done.stderr
    assert "numpy, BLAS 1 thread " in done.stdout and "OPENBLAS_NUM_THREADS=1" in done.stdout
    assert "decode" in done.stdout and "tok/s" in done.stdout and "peak" in done.stdout
    # --json: each row's figures under the keys the page's chatlens.bench() resolves with too
    [row] = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(bench.FIGURE_KEYS) <= set(row) and row["backend"] == "numpy" and row["adapter"] is None


def test_bench_measures_each_row_in_a_child(tmp_path):
    """The rows bench would run (none is run here): BLAS thread counts and the no-BLAS interpreter,
    each again beside a busy process with --busy; another backend is a row of its own."""
    from argparse import Namespace

    from chatlens.host import bench

    noblas = tmp_path / "python"
    noblas.touch()
    args = Namespace(backend="numpy", numpy=["1", "2", "noblas"], noblas_python=str(noblas), busy=True,
                     no_reference=True, new_tokens=8, repeats=2)
    rows = bench.runs(args, tmp_path / "model.gguf")
    assert [r.label for r in rows] == ["numpy, BLAS 1 thread", "numpy, BLAS 1 thread, busy", "numpy, BLAS 2 threads",
                                       "numpy, BLAS 2 threads, busy", "numpy, no BLAS", "numpy, no BLAS, busy"]
    assert [r.busy for r in rows] == [False, True] * 3
    assert rows[2].env == {"OPENBLAS_NUM_THREADS": "2"} and rows[4].argv[0] == str(noblas) and rows[4].env == {}
    assert all(r.argv[1:5] == ["-m", "chatlens", "bench", "--child"] and "--backend" in r.argv for r in rows)
    noblas.unlink()  # no such interpreter: no such row
    assert [r.label for r in bench.runs(Namespace(**{**vars(args), "busy": False}), tmp_path)] == \
        ["numpy, BLAS 1 thread", "numpy, BLAS 2 threads"]
    assert [r.label for r in bench.runs(Namespace(**{**vars(args), "backend": "webgpu"}), tmp_path)] == \
        ["webgpu", "webgpu, busy", "numpy, BLAS 1 thread", "numpy, BLAS 1 thread, busy"]


def test_generate_on_the_gpu_chooses_the_ids_numpy_chooses(hf_dir, tmp_path):
    """`--backend webgpu` (wgpu-py; lavapipe here): the same greedy ids as the NumPy default on
    a short prompt, and the record names the backend. The tiny random model (tests/tiny_model.py)
    runs the command's GPU path in seconds; the real model's GPU steps are held to NumPy's by
    tests/test_gpu_backend.py, through the same open_native."""
    from tiny_model import write_tiny_model

    tiny = write_tiny_model(tmp_path / "tiny", hf_dir)
    ids = [1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308]
    runs = {b: chatlens("generate", "--backend", b, "--max-new-tokens", "3", "--model", str(tiny), stdin=json.dumps(ids))
            for b in ("numpy", "webgpu")}
    out = {b: json.loads(r.stdout) for b, r in runs.items() if r.returncode == 0}
    assert set(out) == {"numpy", "webgpu"}, {b: r.stderr for b, r in runs.items()}
    assert out["webgpu"]["ids"] == out["numpy"]["ids"] and out["webgpu"]["backend"].startswith("webgpu: ")
    assert out["numpy"]["backend"] == "numpy" and len(out["numpy"]["ids"]) == 3
    assert [i for i, _ in out["webgpu"]["top5"]] == [i for i, _ in out["numpy"]["top5"]]
    assert [v for _, v in out["webgpu"]["top5"]] == pytest.approx([v for _, v in out["numpy"]["top5"]], abs=1e-3)

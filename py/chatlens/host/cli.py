"""`python -m chatlens COMMAND`: one sub-command per job; each lives in the host module that does the work."""

import argparse
import os
import sys

from .. import defaults, presets
from ..errors import ChatlensError

# One BLAS thread unless the user's environment says otherwise. OpenBLAS fixes its thread count
# when NumPy is imported, so this runs before any command imports NumPy (nothing above does).
# Measured with `bench --busy` on the 2-core machine (303-token prompt, tokens/s, medians of 3):
#   1 thread  prefill 178, decode 11.0; beside a busy process 155 and 7.2
#   2 threads prefill  26, decode  1.6; beside a busy process  45 and 2.1
# and in three more runs 2 threads gave 0.20-0.56x the prefill and 0.21-0.87x the decode speed of
# one: a second OpenBLAS thread waits for a core that other processes hold, and decoding is bound
# by memory bandwidth, which a second thread does not add. (The no-BLAS NumPy has no threads.)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

BACKENDS = ("numpy", "webgpu", "auto")


def _model_arg(p):
    p.add_argument("--model", help="a .gguf file or a Hugging Face model folder (default: the SmolLM2 Q4_1 GGUF, fetched on first use)")


def _base_model_arg(p, required=False, help="the base model: a .gguf file or a Hugging Face model folder"):
    p.add_argument("--base-model", metavar="PATH", required=required, help=help)


def _backend_arg(p):
    p.add_argument("--backend", choices=BACKENDS, default="numpy",
                   help="what computes: numpy (default), webgpu (wgpu-py), auto (the GPU when an adapter exists)")


def _turn_args(p):
    """What a turn is read under: the backend, the window, the reply limit, the system prompt. run,
    branch and inspect leave a flag not given as None: stdin's field of the same name may give it
    (chatcli.request_on_stdin); chat sets the defaults (_chat_defaults)."""
    _backend_arg(p)
    p.add_argument("--window", type=int, help=f"context window in tokens (default {defaults.DEFAULT_WINDOW})")
    p.add_argument("--max-tokens", type=int,
                   help=f"reply limit, also the reserve kept free (default {defaults.REPLY_LIMIT})")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--system", help="custom system prompt (blank: the template's default)")
    g.add_argument("--preset", help=f"system prompt preset: {', '.join(presets.PRESETS)}")


def _chat_args(p):
    _turn_args(p)
    _top_k_arg(p, default=None)


def _chat_defaults(p):
    p.set_defaults(window=defaults.DEFAULT_WINDOW, max_tokens=defaults.REPLY_LIMIT, top_k=0)


def _top_k_arg(p, default=0):
    p.add_argument("--top-k", type=int, default=default, metavar="K",
                   help="record each reply token's K best candidates with their probabilities (the record's top_k; "
                        "default 0, none)")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="chatlens", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)

    sub.add_parser("fetch", help="download the default model into $CHATLENS_HOME")

    p = sub.add_parser("export-hf", help="write a Hugging Face model folder from a GGUF")
    p.add_argument("out")
    _model_arg(p)

    p = sub.add_parser("tokenize", help="text on stdin -> token ids (JSON)")
    _model_arg(p)
    p.add_argument("--jsonl", action="store_true", help="each input line is a JSON string; print one JSON array a line")

    p = sub.add_parser("generate", help="prompt ids (JSON array) on stdin -> greedy reply ids")
    _model_arg(p)
    _backend_arg(p)
    p.add_argument("--max-new-tokens", type=int, default=defaults.REPLY_LIMIT)

    p = sub.add_parser("bench", help="prefill/decode speed and peak memory, against transformers when installed")
    _model_arg(p)
    _backend_arg(p)
    from .bench import NEW_TOKENS  # the page's bench reads the same (build.json's settings.bench)

    p.add_argument("--new-tokens", type=int, default=NEW_TOKENS, help=f"new tokens each row decodes (default {NEW_TOKENS})")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--numpy", nargs="+", default=["1", "2", "noblas"], metavar="ROW",
                   help="the NumPy backend's rows: a BLAS thread count, or noblas for the NumPy without BLAS "
                        "(measured when --noblas-python exists); default: 1 2 noblas")
    p.add_argument("--noblas-python", metavar="PYTHON",
                   help="an interpreter whose NumPy has no BLAS (default: .cache/noblas-venv/bin/python, "
                        "from scripts/noblas-numpy.sh)")
    p.add_argument("--busy", action="store_true", help="measure each chatlens row again beside a CPU-bound process")
    p.add_argument("--bandwidth", type=float, metavar="GB/S",
                   help="the GPU's memory bandwidth: the roofline decode rate of a GPU row, and the share of it used")
    p.add_argument("--dispatch-us", type=float, metavar="US",
                   help="the fixed cost of one GPU dispatch in microseconds, for the roofline (default: bench.DISPATCH_US, an assumption)")
    p.add_argument("--no-reference", action="store_true", help="skip the transformers run")
    p.add_argument("--json", action="store_true",
                   help="end with one JSON line: each row's figures (bench.FIGURE_KEYS, as the page's chatlens.bench())")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--reference-child", action="store_true", help=argparse.SUPPRESS)

    p = sub.add_parser("check", help="the GPU program's known-answer check (docs/compute.md): JSON, exit status 2 "
                                     "when it fails")
    p.add_argument("--backend", choices=("webgpu", "numpy"), default="webgpu",
                   help="webgpu (default): wgpu-py's adapter; numpy: the NumPy backend's einsum path")
    p.add_argument("--model", help="also check this model's own weights on the GPU (its first step against NumPy's)")
    p.add_argument("--gpu-fault", action="store_true",
                   help="put the documented fault into the GPU program (chatlens.gpu.fault; also CHATLENS_GPU_FAULT=1)")
    p.add_argument("--weights-reference", metavar="PATH", help=argparse.SUPPRESS)  # the mirror's (host.check)

    p = sub.add_parser("render", help="messages (JSON array) on stdin -> rendered text and ids")
    _model_arg(p)
    p.add_argument("--no-generation-prompt", action="store_true", help="end without the assistant's header")
    p.add_argument("--template", metavar="FILE", help="a chat template (Jinja text) to render instead of the model's")
    p.add_argument("--tools", metavar="FILE", help="a JSON array of tool schemas, passed to the template as `tools`")
    p.add_argument("--documents", metavar="FILE", help="a JSON array of documents, passed as `documents`")
    p.add_argument("--continue-final-message", action="store_true",
                   help="leave the last message open for the model to continue (no generation prompt)")
    p.add_argument("--assistant-mask", action="store_true",
                   help='add "assistant_mask": 1 for each token inside the template\'s {% generation %} blocks')

    # run, branch and inspect read the page's request on stdin (chatlens.protocol's Turn, Branch,
    # Inspect: docs/command-line.md); each flag stands for one of its fields
    p = sub.add_parser("run", help='the page\'s Turn on stdin ({"messages": [...], ...}) -> the turn record (JSON)')
    _model_arg(p)
    _chat_args(p)

    p = sub.add_parser("branch", help="the page's Branch on stdin (run's fields, reply_ids, step, id) -> the reply "
                                      "with another token taken at one step, continued greedily (JSON)")
    _model_arg(p)
    _chat_args(p)
    p.add_argument("--step", type=int, help="the step whose choice is replaced (0: the reply's first; or stdin's step)")
    p.add_argument("--id", type=int, help="the token id taken at that step (or stdin's id)")

    p = sub.add_parser("inspect", help="the page's Inspect on stdin (run's fields, reply_ids, step, layout, model) -> "
                                       "one reply step's attention and logit lens (JSON)")
    _model_arg(p)
    _turn_args(p)
    p.add_argument("--step", type=int, help="the step that chose reply id S (default 0: the reply's first)")
    p.add_argument("--top-k", type=int, metavar="K", help="the lens's candidates a layer (default 5)")
    p.add_argument("--layout", choices=("template", "plain"),
                   help="plain: the last message read as plain text, no template (as complete reads it; the system "
                        "prompt and window are not read), as the comparison's plain cells")
    _base_model_arg(p, help="inspect the base model (as the comparison's base cells): it reads the instruct model's "
                            "tokenizer and template, and a reply computed first stops at the instruct's end of turn")

    p = sub.add_parser("cause", help="the page's Cause on stdin (inspect's fields, pieces) -> which piece of the turn "
                                     "one reply step needed: each knocked out and removed (JSON)")
    _model_arg(p)
    _turn_args(p)
    p.add_argument("--step", type=int, help="the step that chose reply id S (default 0: the reply's first)")
    p.add_argument("--piece", action="append", metavar="KIND:INDEX", dest="pieces",
                   help="a piece to take away (system:0, user:1, new:0, header:0, dropped:0, replies:0, history:0, "
                        "or two together: user:0+assistant:0; again for more); default: every piece")
    p.add_argument("--tokens", action="store_true", default=None,
                   help="every reply token's figures too (the answer's and each measure's tokens)")
    p.add_argument("--layout", choices=("template", "plain"), help="as inspect's")
    _base_model_arg(p, help="as inspect's: the base model computes, reading the instruct model's tokenizer and template")

    p = sub.add_parser("needs", help="the page's Needs on stdin (run's fields, replies) -> which turn each reply of "
                                     "the conversation needed: each piece removed, the whole reply watched (JSON)")
    _model_arg(p)
    _turn_args(p)
    p.add_argument("--knocked", action="store_true", default=None, help="knock each piece out too")
    p.add_argument("--piece", action="append", metavar="A+B", dest="pieces",
                   help="two pieces together, for every turn that has both (again for more)")
    p.add_argument("--tokens", action="store_true", default=None, help="every reply token's figures too")

    p = sub.add_parser("complete", help="plain text on stdin, no chat template -> its greedy continuation (JSON)")
    _model_arg(p)
    _backend_arg(p)
    p.add_argument("--max-new-tokens", type=int, default=defaults.REPLY_LIMIT)
    _top_k_arg(p)

    p = sub.add_parser("compare", help="the base model beside the instruct model on the same ids: plain text and "
                                       "the chat template, four greedy replies (JSON)")
    _model_arg(p)
    _base_model_arg(p, required=True)
    p.add_argument("--text", required=True, help="the message both models read, as plain text and inside the template")
    _backend_arg(p)
    p.add_argument("--max-new-tokens", type=int, default=defaults.COMPARE_LIMIT,
                   help=f"each reply's cap (default {defaults.COMPARE_LIMIT}, the lab's)")
    p.add_argument("--top-k", type=int, default=defaults.COMPARE_TOP_K, metavar="K",
                   help=f"the first step's K best candidates in each reply (default {defaults.COMPARE_TOP_K}; 0: none)")

    p = sub.add_parser("chat", help="interactive chat in the terminal")
    _model_arg(p)
    _chat_args(p)
    _chat_defaults(p)

    p = sub.add_parser("record", help="write the recorded five-message conversations for the site")
    _model_arg(p)
    p.add_argument("--out", help="output JSON file (default: site/recorded.json)")
    _base_model_arg(p, help="the real base model (SmolLM2-135M): record the comparison's base half too "
                            "(site/recorded-compare.json); a stand-in is refused")
    p.add_argument("--only", choices=("conversations", "comparison"),
                   help="write only site/recorded.json, or only site/recorded-compare.json (default: both)")

    p = sub.add_parser("build", help="build the static site into build/site/")
    p.add_argument("--out", help="output folder (default: build/site)")
    p.add_argument("--pyodide-dist", help="a full Pyodide distribution to self-host (numpy included)")
    _gpu_fault_arg(p)

    p = sub.add_parser("protocol", help="print the page's side of the worker protocol (site/js/worker/protocol.gen.mjs)")
    p.add_argument("--write", action="store_true", help="write it into the checkout (the working directory)")

    p = sub.add_parser("serve", help="build if needed and serve the site with a local model mirror")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--no-build", action="store_true", help="serve the existing build as it is")
    _base_model_arg(p, help="a base model (a .gguf or a Hugging Face folder) to serve beside the instruct model")
    _gpu_fault_arg(p)
    return ap


def _gpu_fault_arg(p):
    p.add_argument("--gpu-fault", action="store_true",
                   help="for tests only: a site whose GPU program has chatlens.gpu.fault's documented fault (built into "
                        "build/site-gpu-fault unless --out says otherwise); the page says it is a faulty test build")


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    # Commands import their modules lazily: `tokenize` must not pay for numpy, `chat` not for the site.
    try:
        if args.command == "fetch":
            from .fetch import fetch
            print(fetch())
        elif args.command == "export-hf":
            from .export import export_hf
            return export_hf(args)
        elif args.command in ("tokenize", "generate"):
            from . import commands
            return getattr(commands, args.command)(args)
        elif args.command == "bench":
            from .bench import main as bench
            return bench(args)
        elif args.command == "check":
            from .check import main as check
            return check(args)
        elif args.command == "complete":
            from .complete import complete
            return complete(args)
        elif args.command == "compare":
            from .compare import compare
            return compare(args)
        elif args.command in ("render", "run", "branch", "inspect", "cause", "needs", "chat", "record"):
            from . import chatcli
            return getattr(chatcli, args.command)(args)
        elif args.command == "build":
            from .build import build
            return build(args)
        elif args.command == "serve":
            from .serve import serve
            return serve(args)
        elif args.command == "protocol":
            from .. import protocol
            if not args.write:
                sys.stdout.write(protocol.javascript())
                return 0
            from pathlib import Path
            Path(protocol.GENERATED).write_text(protocol.javascript(), encoding="utf-8")
    except ChatlensError as e:
        print(f"chatlens: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0

"""What a cause card and a conversation's matrix cost (chatlens.cause, chatlens.needs), on NumPy,
beside a decode step of the same model on the same machine, measured back to back.

    python3 scripts/bench_cause.py [--model PATH] [--repeats 5] [--steps 1 10 last] [--matrix] [--pulls]

The turns: Pirate, "Who are you?" (three pieces: the system prompt, the message, the generation
header), then, after the model's own greedy reply, "Where is your ship?" (five: the kept turn's
two messages too). For each turn and step: the card's wall time (median of --repeats), the same in
decode steps (the median decode step of its reply, timed in this process just before), and the
tokens it ran through, each twice: every figure computed (the command line's), and as the
page's worker runs it, with the reply's own candidates (its figures with every piece read, a pass
fewer). Step "last" is the whole reply: the token strip's every token, every piece, both
measures. --matrix: the lesson's three-turn conversation (Priya, a tip for sleeping, "What is my
name?"), each reply the model's own, its matrix (every reply's pieces removed) timed the same
way. --pulls: each pull's time, read 16 ids a pull (contract.READ_CHUNK) as the page read before
its pace, then as its worker reads now (each pull sized to contract.PULL_MS by the last's time:
chatlens.pace): a stop is answered between two pulls, so the longest bounds how long a stop waits
on NumPy.
Figures vary with the machine's load: quote medians and the ratio.
"""

import argparse
import statistics
import time
from dataclasses import replace

from chatlens import presets
from chatlens.cache import PromptCache
from chatlens.cause import Causing
from chatlens.chat import preview
from chatlens.contract import PULL_MS, READ_CHUNK
from chatlens.defaults import TOP_K
from chatlens.host.models import open_model
from chatlens.needs import Needing, replies_of
from chatlens.pace import Pace
from chatlens.pieces import turn_pieces
from chatlens.pull import greedy

FIRST, SECOND = "Who are you?", "Where is your ship?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a .gguf or a Hugging Face folder (default: the Q4_1 GGUF)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", nargs="+", default=["1", "10", "last"])
    ap.add_argument("--window", type=int, default=1024)
    ap.add_argument("--matrix", action="store_true", help="also the three-turn conversation's matrix")
    ap.add_argument("--pulls", action="store_true", help="also each pull's time, read in the page's chunks")
    args = ap.parse_args()
    model = open_model(args.model, "numpy")
    tok, tpl, system = model.tokenizer, model.template, presets.PRESETS["pirate"]

    def turn(messages):
        record = preview(tok, tpl, system=system, messages=messages, window=args.window, reserve=96)
        cache = PromptCache(model.backend(n_ctx=args.window))
        _, gen = cache.generate(record.prompt_ids, eos_id=model.eos_id, max_new_tokens=96, top_k=TOP_K)
        return record, gen, cache

    first, gen, cache = turn([{"role": "user", "content": FIRST}])
    card(model, [{"role": "user", "content": FIRST}], first, gen, cache, args)
    messages = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": tok.decode(gen.ids[:-1])},
                {"role": "user", "content": SECOND}]
    record, gen, cache = turn(messages)
    card(model, messages, record, gen, cache, args)
    if args.matrix:
        matrix(model, args)


def card(model, messages, record, gen, cache, args):
    tok, tpl, reply = model.tokenizer, model.template, gen.ids
    pieces = turn_pieces(tok, tpl, record, messages)
    step_s, decode = decode_step(model, record.prompt_ids, reply, args.window)
    print(f"\nturn {len(messages) // 2 + 1}: prompt {len(record.prompt_ids)} tokens, reply {len(reply)}, "
          f"pieces {', '.join(p.name for p in pieces)}")
    print(f"  decode step: median {1000 * step_s:.1f} ms over {len(decode)} steps")
    for s in args.steps:
        step = len(reply) - 1 if s == "last" else int(s)
        # every figure computed (the command line's), then as the page asks: with the reply's own candidates
        for own, how in ((None, "card"), (gen.top_k, "with the reply's own candidates")):
            times = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                job = Causing(cache, record.prompt_ids, reply, pieces, step=step, reply_top_k=own)
                while not job.done:
                    job.pull()
                times.append(time.perf_counter() - t)
            took = statistics.median(times)
            print(f"  step {step} ({tok.token_text(reply[step])!r}): {how} median {1000 * took:.0f} ms = "
                  f"{took / step_s:.1f} decode steps; {job.result.computed_tokens} tokens run through")
        if args.pulls:
            print(f"    {pulls(cache, lambda: Causing(cache, record.prompt_ids, reply, pieces, step=step, chunk=READ_CHUNK))}")


def pulls(cache, job):
    """Each pull of job() over `cache`, read in fixed chunks as the page read before its pace and
    paced as its worker paces it, timed, in words: how long a stop may wait for the one under way."""
    return f"{pulled(cache, job, None)}\n    {pulled(cache, job, Pace(PULL_MS))}"


def pulled(cache, job, pace):
    cache.pace = pace
    job, ms = job(), []
    t0 = time.perf_counter()
    while not job.done:
        t = time.perf_counter()
        job.pull()
        ms.append(1000 * (time.perf_counter() - t))
    took = time.perf_counter() - t0
    cache.pace = None
    ms.sort()
    how = f"at most {READ_CHUNK} ids a pull, sized to {PULL_MS} ms" if pace else f"{READ_CHUNK} ids a pull"
    return (f"{how}: {len(ms)} pulls in {took:.1f} s, median "
            f"{statistics.median(ms):.0f} ms, 90th percentile {ms[int(0.9 * len(ms))]:.0f} ms, longest {ms[-1]:.0f} ms")


def decode_step(model, prompt_ids, reply, window):
    """The median decode step of `reply` after `prompt_ids`, timed here: (seconds, the steps' times)."""
    backend = model.backend(n_ctx=window)
    backend.prefill(prompt_ids)
    decode = []
    for i in reply[:-1]:
        t = time.perf_counter()
        backend.decode(i)
        decode.append(time.perf_counter() - t)
    return statistics.median(decode), decode


MATRIX = ["Hi! My name is Priya.", "Give me one tip for sleeping better.", "What is my name?"]


def matrix(model, args):
    """The lesson's three turns, each reply the model's own (96 tokens at most), then their matrix,
    each reply measured with its ids, as the page asks it of a conversation it wrote."""
    tok, tpl = model.tokenizer, model.template
    messages, written, ids = [], {}, []
    cache = PromptCache(model.backend(n_ctx=args.window))
    for text in MATRIX:
        messages.append({"role": "user", "content": text})
        record = preview(tok, tpl, system=None, messages=messages, window=args.window, reserve=96)
        _, gen = cache.generate(record.prompt_ids, eos_id=model.eos_id, max_new_tokens=96, top_k=TOP_K)
        written[tuple(record.prompt_ids), tuple(gen.ids)] = gen.top_k  # as the page's worker keeps them
        ids.append(gen.ids)  # each reply's ids as its record has them, as the page asks the matrix
        messages.append({"role": "assistant", "content": tok.decode([i for i in gen.ids if i != model.eos_id])})
    step_s, _ = decode_step(model, record.prompt_ids, gen.ids, args.window)

    def record_of(request):
        return preview(tok, tpl, system=None, messages=request.messages, window=args.window, reserve=96)

    from chatlens.contract import Needs

    replies = replies_of(record_of, tok, tpl, model.eos_id, Needs(messages=messages, window=args.window, replies=ids))
    print(f"\nthe matrix: {len(replies)} replies of {[len(r.reply_ids) for r in replies]} tokens, "
          f"pieces {[len(r.pieces) for r in replies]}")
    own = [replace(r, top_k=written.get((tuple(r.record.prompt_ids), tuple(r.reply_ids)))) for r in replies]
    for measured, how in ((replies, "every figure computed"), (own, "with the replies' own candidates")):
        times = []
        for _ in range(args.repeats):
            cache = PromptCache(model.backend(n_ctx=max(r.cache for r in replies)))
            cache.prefill(record.prompt_ids + gen.ids)  # as the chat leaves it: the last turn cached
            t = time.perf_counter()
            job = Needing(cache, measured)
            greedy(job)
            times.append(time.perf_counter() - t)
        took = statistics.median(times)
        print(f"  every reply's pieces removed, the last turn cached, {how}: median {1000 * took:.0f} ms = "
              f"{took / step_s:.1f} decode steps (step {1000 * step_s:.1f} ms); {job.prompt_read} tokens run through")
    if args.pulls:
        cache = PromptCache(model.backend(n_ctx=max(r.cache for r in replies)))
        cache.prefill(record.prompt_ids + gen.ids)
        print(f"    {pulls(cache, lambda: Needing(cache, replies, chunk=READ_CHUNK))}")


if __name__ == "__main__":
    main()

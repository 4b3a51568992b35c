"""What a cause card costs (chatlens.cause): every piece of a Pirate turn knocked out and removed, on
NumPy, beside a decode step of the same model on the same machine, measured back to back.

    python3 scripts/bench_cause.py [--model PATH] [--repeats 5] [--steps 1 10 last]

The turns: Pirate, "Who are you?" (three pieces: the system prompt, the message, the generation
header), then, after the model's own greedy reply, "Where is your ship?" (five: the kept turn's
two messages too). For each turn and step: the card's wall time (median of --repeats), the same in decode steps
(the median decode step of its reply, timed in this process just before), and the tokens it ran
through. Figures vary with the machine's load: quote medians and the ratio.
"""

import argparse
import statistics
import time

from chatlens import presets
from chatlens.cache import PromptCache
from chatlens.cause import Causing, pieces_of, read_of, removed_prompt
from chatlens.chat import preview
from chatlens.host.models import open_model

FIRST, SECOND = "Who are you?", "Where is your ship?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a .gguf or a Hugging Face folder (default: the Q4_1 GGUF)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", nargs="+", default=["1", "10", "last"])
    ap.add_argument("--window", type=int, default=1024)
    args = ap.parse_args()
    model = open_model(args.model, "numpy")
    tok, tpl, system = model.tokenizer, model.template, presets.PRESETS["pirate"]

    def turn(messages):
        record = preview(tok, tpl, system=system, messages=messages, window=args.window, reserve=96)
        cache = PromptCache(model.backend(n_ctx=args.window))
        _, gen = cache.generate(record.prompt_ids, eos_id=model.eos_id, max_new_tokens=96)
        return record, gen.ids, cache

    first, reply, cache = turn([{"role": "user", "content": FIRST}])
    card(model, [{"role": "user", "content": FIRST}], first, reply, cache, args)
    messages = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": tok.decode(reply[:-1])},
                {"role": "user", "content": SECOND}]
    record, reply, cache = turn(messages)
    card(model, messages, record, reply, cache, args)


def card(model, messages, record, reply, cache, args):
    tok, tpl = model.tokenizer, model.template
    read = read_of(record, messages)
    pieces = pieces_of(read, record.pieces)
    for p in pieces:
        if p.removed_why is None:
            p.removed_ids, p.removed_what = removed_prompt(tok, tpl, read, p)

    backend = model.backend(n_ctx=args.window)
    backend.prefill(record.prompt_ids)
    decode = []
    for i in reply[:-1]:
        t = time.perf_counter()
        backend.decode(i)
        decode.append(time.perf_counter() - t)
    step_s = statistics.median(decode)
    print(f"\nturn {len(messages) // 2 + 1}: prompt {len(record.prompt_ids)} tokens, reply {len(reply)}, "
          f"pieces {', '.join(p.name for p in pieces)}")
    print(f"  decode step: median {1000 * step_s:.1f} ms over {len(decode)} steps")
    for s in args.steps:
        step = len(reply) - 1 if s == "last" else int(s)
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            job = Causing(cache, record.prompt_ids, reply, pieces, step=step)
            while not job.done:
                job.pull()
            times.append(time.perf_counter() - t)
        took = statistics.median(times)
        print(f"  step {step} ({tok.token_text(reply[step])!r}): card median {1000 * took:.0f} ms = "
              f"{took / step_s:.1f} decode steps; {job.result.computed_tokens} tokens run through")

if __name__ == "__main__":
    main()

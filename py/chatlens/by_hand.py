"""A chat template and a context window, written by hand.

What chatlens does for SmolLM2, in plain Python: the chat template as string formatting, and
the loop that drops the oldest turns until the conversation fits the window. Standard library
only. The page shows this file, runs it (edited or not) in its own Python, and checks the text
it builds against the real template's rendering of the same messages.

One thing is not written by hand: counting tokens needs the model's tokenizer. The page (and
chatlens's tests) hand this code `count_tokens`, SmolLM2's real tokenizer; run on its own, the
code guesses about four characters a token.
"""

DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

try:
    count_tokens  # given by the page: the length of SmolLM2's tokenization of a text
except NameError:
    def count_tokens(text):
        return len(text) // 4 + 1  # a rough guess, for running this file on its own


def render(messages):
    """SmolLM2's chat template by hand: each message between <|im_start|>ROLE and <|im_end|>,
    the template's own system prompt when the messages bring none, then the opening of the
    reply the model is to write."""
    text = ""
    if messages[0]["role"] != "system":
        text += f"<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n"
    for m in messages:
        text += f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n"
    return text + "<|im_start|>assistant\n"


def turns(history):
    """The history cut into turns: a user message and the replies after it."""
    out = []
    for m in history:
        if m["role"] == "user" or not out:
            out.append([])
        out[-1].append(m)
    return out


def fit(system, history, new_message, window, reserve):
    """Drop the oldest whole turns until the prompt leaves `reserve` tokens of the window free
    for the reply. The system prompt and the new message always stay. Returns the messages
    kept, the prompt they make, and how many turns were dropped."""
    head = [{"role": "system", "content": system}] if system else []
    kept = turns(history)
    dropped = 0
    while True:
        messages = head + [m for turn in kept for m in turn] + [new_message]
        prompt = render(messages)
        if count_tokens(prompt) + reserve <= window:
            return messages, prompt, dropped
        if not kept:
            raise ValueError("the system prompt and the new message alone do not fit the window")
        kept = kept[1:]  # the oldest turn goes, all of it
        dropped += 1


if __name__ == "__main__":
    # The lesson's program: two turns, then "What is my name?", in a window of 128 tokens with
    # 32 kept free for the reply. The lesson gives only its replies' sizes (18 and 23 tokens with
    # the template's); these two replies have exactly those sizes.
    history = [
        {"role": "user", "content": "Hi! My name is Priya."},
        {"role": "assistant", "content": "Hello, Priya! How can I help you today?"},
        {"role": "user", "content": "Give me one tip for sleeping better."},
        {"role": "assistant", "content": "Go to bed and wake up at the same time every day, even on weekends."},
    ]
    new_message = {"role": "user", "content": "What is my name?"}
    kept, prompt, dropped = fit(None, history, new_message, window=128, reserve=32)
    print(f"{dropped} turn{'' if dropped == 1 else 's'} dropped; the prompt is {count_tokens(prompt)} tokens")
    print(prompt)

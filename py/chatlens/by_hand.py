# SmolLM2-135M-Instruct's chat template, written out by hand.
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

def piece(role, content):
    return f"<|im_start|>{role}\n{content}<|im_end|>\n"

def render(system, turns, message):
    text = piece("system", system or DEFAULT_SYSTEM)  # inserted when none is given
    for user, assistant in turns:
        text += piece("user", user) + piece("assistant", assistant)
    return text + piece("user", message) + "<|im_start|>assistant\n"

turns = [
    ("Hi! My name is Priya.", "Hello, Priya! How can I help you today?"),
    ("Give me one tip for sleeping better.",
     "Go to bed and wake up at the same time every day, even on weekends."),
]
message = "What is my name?"

# Tokens in each piece, counted with SmolLM2's tokenizer. Special tokens split
# the text, so the pieces' counts add up to the whole prompt's.
count = {"system": 21, "header": 4, "What is my name?": 10,
         turns[0]: 13 + 18, turns[1]: 13 + 23}

window, reply_limit = 128, 32  # the app keeps room for the reply
kept = list(turns)
while True:
    used = count["system"] + sum(count[t] for t in kept) + count[message] + count["header"]
    if used + reply_limit <= window or not kept:
        break
    kept.pop(0)  # drop the oldest turn

print(f"{len(turns) - len(kept)} turn dropped; the prompt is {used} tokens:")
print(render(None, kept, message))

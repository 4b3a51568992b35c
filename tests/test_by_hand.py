"""The lab's hand-written template and window (chatlens/by_hand.py) run as the page runs it: the
lesson's program prints the lesson's result, and its text is the real template's."""

import contextlib
import io
import runpy


from chatlens.source import load_text_side


def test_the_lesson_program_drops_one_turn_and_reads_71_tokens(gguf_path):
    from importlib import resources

    text = load_text_side(gguf_path)
    path = resources.files("chatlens").joinpath("by_hand.py")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = runpy.run_path(str(path), init_globals={"count_tokens": lambda t: len(text.tokenizer.encode(t))},
                                run_name="__main__")
    first = out.getvalue().splitlines()[0]
    assert first == "1 turn dropped; the prompt is 71 tokens"
    kept, prompt = result["kept"], result["prompt"]
    assert [m["content"] for m in kept] == ["Give me one tip for sleeping better.", result["history"][3]["content"],
                                            "What is my name?"]
    assert prompt == text.template.render(kept, add_generation_prompt=True)

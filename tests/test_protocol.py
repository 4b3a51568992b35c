"""chatlens.protocol's answer types are what the worker answers: each request's handler returns an
instance of the type the contract names for it (the tiny model on NumPy answers here), and what
goes on the wire is that instance serialised by protocol.to_json, field for field."""

import json
from dataclasses import fields

import pytest

from chatlens import jobs, protocol, worker
from chatlens.record import TurnRecord
from tiny_model import write_tiny_model

TURN = {"messages": [{"role": "user", "content": "Tell me about lighthouses."}], "window": 256, "max_tokens": 4,
        "reserve": 4, "system": "Be brief."}


def names(cls):
    return {f.name for f in fields(cls)}


def ask(name, args, *extra):
    """The request as the page's worker makes it: JSON in, JSON out."""
    out = json.loads(worker.call(name, json.dumps(args), *extra))
    assert out["ok"], out["error"]
    return out["result"]


@pytest.fixture(scope="module")
def tiny(hf_dir, tmp_path_factory):
    folder = write_tiny_model(tmp_path_factory.mktemp("tiny") / "model", hf_dir)
    ask("load", {"path": str(folder)})
    return folder


def answered(name, args, *extra):
    """The handler's answer for `args` (parsed as the worker parses them), checked to be an
    instance of the contract's type for the request, and equal to what the wire carries."""
    request_type, answer_type = protocol.REQUESTS[name]
    value = worker.HANDLERS[name](protocol.parse(request_type, args), *extra)
    if answer_type is protocol.GpuProgramAnswer:
        assert isinstance(value, dict)
    else:
        assert isinstance(value, answer_type), (name, type(value))
    return value


def test_each_answer_is_an_instance_of_its_type_and_the_wire_carries_its_fields(tiny):
    for name, args in [("load", {"path": str(tiny)}), ("use_numpy", {}), ("tokenize", {"text": "Hi"}),
                       ("render", {"messages": TURN["messages"]}), ("chat_template", {}), ("lab_source", {}),
                       ("run_python", {"code": "x = 1", "results": ["x"]}), ("predict", TURN), ("preview", TURN),
                       ("complete", {"text": "Once upon", "max_tokens": 2}), ("run", TURN)]:
        value = answered(name, args)
        wire = ask(name, args)
        assert set(wire) == names(type(value)), name
    # a pulled job: each answer a PullAnswer, each token a Token, the done a TurnRecord
    out = answered("start", {"kind": "run", "args": {**TURN, "top_k": 2}})
    assert out.record is not None and out.record.reply_ids is None  # what the model reads, before the reply
    while out.done is None:
        out = answered("step", {})
        assert all(isinstance(t, protocol.Token) for t in out.tokens)
    record = out.done
    assert isinstance(record, TurnRecord) and record.reply_ids and record.top_k
    assert names(protocol.Reply) <= names(TurnRecord)  # the record's reply half is a Reply
    assert all(getattr(record, name) is not None for name in names(protocol.Reply))
    counted = answered("start", {"kind": "count", "args": {**TURN, "messages": [{"role": "user", "content": "x " * 400}]}})
    while counted.done is None:
        counted = answered("step", {})
    assert isinstance(counted.done, protocol.Counted)


def test_a_continuation_is_the_texts_tokens_and_a_reply_under_the_records_names(tiny):
    out = answered("complete", {"text": "Once upon", "max_tokens": 2, "top_k": 1})
    assert names(protocol.Continuation) == names(protocol.Tokenized) | names(protocol.Reply) | {"eos_id"}
    assert out.prompt_ids and len(out.reply_ids) == len(out.top_k) == len(out.reply_tokens) <= 2


def test_every_request_kind_and_message_names_a_described_type():
    types = protocol.describe()["types"]
    for args, answer in [*protocol.REQUESTS.values(), *protocol.PAGE_REQUESTS.values()]:
        assert args.__name__ in types and answer.__name__ in types
    assert set(worker.HANDLERS) == set(protocol.REQUESTS)  # Python answers exactly the requests described
    for job in jobs.KINDS.values():  # each job's class declares its page request, and the page's list has it
        assert job.takes.__name__ in types and job.answers.__name__ in types and callable(job.start)
        assert protocol.PAGE_REQUESTS[job.request] == (job.takes, job.answers)
    assert set(protocol.describe()["jobs"]) == {job.request for job in jobs.KINDS.values()}
    for cls in [*protocol.SIGNALS.values(), *protocol.EVENTS.values()]:
        assert cls.__name__ in types and cls.__doc__
    for name, fs in types.items():
        assert all(f["doc"] for f in fs), name  # each field has its line of doc

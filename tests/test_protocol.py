"""chatlens.protocol's answer types say what the worker answers: each field a real answer carries
is described there, and each field described is carried (the tiny model on NumPy answers here)."""

import json
from dataclasses import fields

import pytest

from chatlens import protocol, worker
from chatlens.record import TurnRecord
from tiny_model import write_tiny_model

TURN = {"messages": [{"role": "user", "content": "Tell me about lighthouses."}], "window": 256, "max_tokens": 4,
        "reserve": 4, "system": "Be brief."}


def call(name, args):
    out = json.loads(worker.call(name, json.dumps(args)))
    assert out["ok"], out["error"]
    return out["result"]


def names(cls):
    return {f["name"] for f in protocol.describe()["types"][cls.__name__]}


@pytest.fixture(scope="module")
def tiny(hf_dir, tmp_path_factory):
    folder = write_tiny_model(tmp_path_factory.mktemp("tiny") / "model", hf_dir)
    call("load", {"path": str(folder)})
    return folder


def test_each_answer_carries_exactly_its_types_fields(tiny):
    assert set(call("load", {"path": str(tiny)})) == names(protocol.Loaded)
    assert set(call("use_numpy", {})) == names(protocol.BackendInfo)
    assert set(call("tokenize", {"text": "Hi"})) == names(protocol.Tokenized)
    assert set(call("render", {"messages": TURN["messages"]})) == names(protocol.Rendered) - {"assistant_mask"}
    assert set(call("chat_template", {})) == names(protocol.TemplateInfo)
    assert set(call("lab_source", {})) == names(protocol.LabSource)
    assert set(call("run_python", {"code": "x = 1", "results": ["x"]})) == names(protocol.PythonRun)
    assert set(call("predict", TURN)) == names(protocol.Prediction)
    assert set(call("complete", {"text": "Once upon", "max_tokens": 2})) == names(protocol.Continuation)
    out = call("start", {"kind": "chat", "args": {**TURN, "top_k": 2}})
    assert set(out) == names(protocol.PullAnswer)
    while out["done"] is None:
        out = call("step", {})
        assert set(out) == names(protocol.PullAnswer)
        assert all(set(t) == names(protocol.Token) for t in out["tokens"])
    record = out["done"]
    assert set(record) == {f.name for f in fields(TurnRecord)}
    assert names(protocol.Reply) <= set(record)  # the record's reply half is a Reply
    assert all(record[name] is not None for name in names(protocol.Reply))
    counted = call("start", {"kind": "count", "args": {**TURN, "messages": [{"role": "user", "content": "x " * 400}]}})
    while counted["done"] is None:
        counted = call("step", {})
    assert set(counted["done"]) == names(protocol.Counted)


def test_every_request_and_message_names_a_described_type():
    types = protocol.describe()["types"]
    for args, answer in [*protocol.REQUESTS.values(), *protocol.PAGE_REQUESTS.values()]:
        assert args.__name__ in types and answer.__name__ in types
    assert set(protocol.REQUESTS) == set(worker.REQUESTS)  # Python answers exactly the requests described
    for cls in [*protocol.SIGNALS.values(), *protocol.EVENTS.values()]:
        assert cls.__name__ in types and cls.__doc__
    for name, fs in types.items():
        assert all(f["doc"] for f in fs), name  # each field has its line of doc

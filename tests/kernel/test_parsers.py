import pytest

from qitos.core.parsers import JsonDecisionParser, NativeToolsParser, ReactTextParser, get_parser
from qitos.models.base import ModelResponse, ToolCall


def r(text=None, calls=()):
    return ModelResponse(text=text, tool_calls=list(calls))


def test_react_action_and_final():
    p = ReactTextParser()
    out = p.parse(r('Thought: look\nAction: read_file\nAction Input: {"path": "a.py"}'))
    assert out.ok and out.decision.actions[0].name == "read_file" and out.decision.actions[0].arguments == {"path": "a.py"}
    assert out.decision.rationale == "look"
    out = p.parse(r("Thought: done\nFinal Answer: 42\nmore"))
    assert out.ok and out.decision.mode == "final" and out.decision.final_answer == "42\nmore"
    out = p.parse(r("Action: list_files\nAction Input:"))
    assert out.ok and out.decision.actions[0].arguments == {}
    out = p.parse(r('Action: `read_file`\nAction Input: ```json\n{"path": "x"}\n```\nObservation: fake'))
    assert out.ok and out.decision.actions[0].arguments == {"path": "x"}


@pytest.mark.parametrize("text, fragment", [
    ("", "empty response"),
    ("I think the answer is 4", "no `Action:`"),
    ('Action: read_file\nAction Input: {"path": }', "not valid JSON"),
    ('Action: read_file\nAction Input: ["a"]', "not an object"),
])
def test_react_malformed_gives_diagnostic_and_repair(text, fragment):
    out = ReactTextParser().parse(r(text))
    assert not out.ok and fragment in out.diagnostics[0] and out.repair


def test_json_decision():
    p = JsonDecisionParser()
    out = p.parse(r('```json\n{"thought": "t", "action": {"name": "f", "arguments": {"a": 1}}}\n```'))
    assert out.ok and out.decision.actions[0].arguments == {"a": 1}
    assert p.parse(r('{"final_answer": 7}')).decision.final_answer == "7"
    for bad in ["no json here", '{"thought": "x",}', '{"action": {"arguments": {}}}', '{"action": {"name": "f", "arguments": 3}}']:
        out = p.parse(r(bad))
        assert not out.ok and out.repair


def test_native_tools():
    p = NativeToolsParser()
    out = p.parse(r(None, [ToolCall(id="c1", name="f", arguments={"x": 1})]))
    assert out.ok and out.decision.actions[0].id == "c1"
    assert p.parse(r("the answer")).decision.final_answer == "the answer"
    bad = p.parse(r(None, [ToolCall(id="c1", name="f", arguments={"__raw__": "{oops"})]))
    assert not bad.ok and "not valid JSON" in bad.diagnostics[0]
    assert not p.parse(r("")).ok


def test_parser_names_are_stable():
    assert {get_parser(n).name for n in ("react_text_v1", "json_decision_v1", "native_tools_v1")} == {
        "react_text_v1", "json_decision_v1", "native_tools_v1"}
    with pytest.raises(ValueError, match="unknown parser"):
        get_parser("nope")

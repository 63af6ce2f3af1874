"""Run upstream tau-bench (from the data dir's upstream/) and `qit bench run` against one scripted server.

Upstream's code imports ``litellm``; ``LITELLM_STUB`` is a minimal stand-in that sends what litellm
sends to an OpenAI-compatible endpoint (model, messages, and tools/temperature only when given) and
returns objects shaped like litellm's (``Message`` printed as litellm 1.x prints it). The scripted
model (:func:`scripted_reply`) answers every request from its content alone, so both runs get the
same reply to the same request whatever else happened before.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import sys
import types
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from tests.support.openai_server import Reply

LITELLM_STUB = '''
import httpx
from typing import Any, Optional, List
from pydantic import BaseModel

provider_list = ["openai"]
BASE_URL = None


class _Printed(BaseModel):
    def __str__(self):  # litellm's objects print as openai's models do: Name(field=value, ...)
        return repr(self)


class Function(_Printed):
    arguments: str
    name: str


class ChatCompletionMessageToolCall(_Printed):
    function: Function
    id: str
    type: str = "function"


class Message(_Printed):
    content: Optional[str] = None
    role: str = "assistant"
    tool_calls: Optional[List[ChatCompletionMessageToolCall]] = None
    function_call: Optional[Any] = None
    provider_specific_fields: Optional[dict] = None


class Choices(BaseModel):
    message: Message


class ModelResponse:
    def __init__(self, message):
        self.choices = [Choices(message=message)]
        self._hidden_params = {"response_cost": 0.0}


def completion(model, messages, custom_llm_provider=None, tools=None, temperature=None, **kwargs):
    assert not kwargs, kwargs
    body = {"model": model, "messages": messages}
    if tools is not None:
        body["tools"] = tools
    if temperature is not None:
        body["temperature"] = temperature
    data = httpx.post(BASE_URL + "/chat/completions", json=body, timeout=30).raise_for_status().json()
    return ModelResponse(Message(**data["choices"][0]["message"]))
'''


@contextmanager
def upstream_modules(upstream: Path, base_url: str) -> Iterator[types.ModuleType]:
    """Upstream's ``tau_bench.run`` importable, with the stub as ``litellm``; removed again afterwards."""
    stub = types.ModuleType("litellm")
    exec(compile(LITELLM_STUB, "litellm_stub", "exec"), stub.__dict__)  # noqa: S102 - the test's own stub
    stub.BASE_URL = base_url
    saved = {name: module for name, module in sys.modules.items() if name == "litellm" or name.startswith("tau_bench")}
    for name in saved:
        del sys.modules[name]
    sys.modules["litellm"] = stub
    sys.path.insert(0, str(upstream))
    try:
        import tau_bench.run as run

        yield run
    finally:
        sys.path.remove(str(upstream))
        for name in [n for n in sys.modules if n == "litellm" or n.startswith("tau_bench")]:
            del sys.modules[name]
        sys.modules.update(saved)


def upstream_display_metrics(upstream: Path, results: list[dict[str, Any]]) -> dict[str, float]:
    """Upstream run.py's own ``display_metrics`` on these results (EnvRunResult fields), read from what it prints:
    ``upstream_average_reward`` and ``upstream_pass^k``, the names ``qit bench eval`` gives them."""
    with upstream_modules(upstream, "http://127.0.0.1:9") as run:  # no model call is made
        from tau_bench.types import EnvRunResult

        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            run.display_metrics([EnvRunResult(**{"info": {}, "traj": [], **r}) for r in results])
    figures: dict[str, float] = {}
    for line in printed.getvalue().splitlines():
        if "Average reward:" in line:
            figures["upstream_average_reward"] = float(line.split(":", 1)[1])
        elif line.strip().startswith("k="):
            k, value = line.strip()[2:].split(":", 1)
            figures[f"upstream_pass^{k}"] = float(value)
    return figures


# --- the scripted model -----------------------------------------------------------------------------
USER_ROLE = "You are a user interacting with an agent."
SUPERVISOR = "You are a supervisor of the Agent"
DONE = "That is all DONE."
NULL_REPLY = "<null>"  # a scripted move: a reply with content null and no tool call


class Script:
    """Replies chosen from the request only: user simulator, judge, reflection, or agent by protocol."""

    def __init__(self, tau_data: Path) -> None:
        self.edges = False  # also reply with no content and no tool call, and respond with list content
        self.tasks: dict[str, list[dict[str, Any]]] = {}
        self.by_instruction: dict[str, tuple[str, int]] = {}
        for domain in ("retail", "airline"):
            tasks = json.loads((tau_data / domain / "tasks_test.json").read_text(encoding="utf-8"))
            self.tasks[domain] = tasks
            for index, task in enumerate(tasks):
                self.by_instruction.setdefault(task["instruction"], (domain, index))

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        first = str(messages[0].get("content"))
        if first.startswith(USER_ROLE):
            return self.user(messages)
        if first.startswith(SUPERVISOR):
            return self.supervisor(first)
        return self.agent(body)

    def user(self, messages: list[dict[str, Any]]) -> Reply:
        system = messages[0]["content"]
        react = "User Response:" in system
        found = next(((d, i) for text, (d, i) in self.by_instruction.items() if f"Instruction: {text}\n" in system), None)
        turn = sum(1 for m in messages if m["role"] == "assistant")
        last = str(messages[-1].get("content"))
        if found is None:
            text = "Hi."  # upstream's constructors reset the user once without an instruction
        elif DONE in last:
            text = "###STOP###"
        elif turn == 0:
            text = f"Hello, I need help with my request [{found[0]} {found[1]}]."
        else:
            text = f"Yes, please go ahead (turn {turn}, {len(last)} chars seen)."
        return Reply(text=f"Thought:\nI answer.\nUser Response:\n{text}" if react and text != "###STOP###" else text)

    def supervisor(self, prompt: str) -> Reply:
        digest = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
        if "Reflection:" in prompt:
            return Reply(text=f"Reflection:\nBe more specific.\n\nResponse:\nPlease be specific ({digest % 97}).")
        return Reply(text="false" if digest % 3 == 0 else "True, it is satisfactory.")

    def agent(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        opening = str(messages[1].get("content"))
        domain, index = None, -1
        for d in ("retail", "airline"):
            marker = f"[{d} "
            if marker in opening:
                domain, index = d, int(opening.split(marker, 1)[1].split("]", 1)[0])
        step = sum(1 for m in messages if m["role"] == "assistant")
        plan = self.plan(domain, index, native=bool(body.get("tools")))
        name, kwargs = plan[min(step, len(plan) - 1)]
        if body.get("tools"):
            reply = self.native(name, kwargs, index)
            digest = hashlib.sha256(json.dumps(normal_request(body), sort_keys=True).encode()).hexdigest()[:8]
            for number, call in enumerate(reply.tool_calls):  # ids from the request: the same in both runs
                call["id"] = f"call_{digest}_{number}"
            return reply
        react = "Thought:" in str(messages[0]["content"]).split("#Available tools")[-1]
        if name == NULL_REPLY:
            return Reply(text=None)
        if kwargs is None:  # text that is not an action JSON
            return Reply(text=(f"Thought:\nhmm\nAction:\n{name}" if react else name))
        action = json.dumps({"name": name, "arguments": kwargs})
        return Reply(text=(f"Thought:\nNext step.\nAction:\n{action}" if react else f"Action:\n{action}"))

    def native(self, name: str, kwargs: dict[str, Any] | None, index: int) -> Reply:
        if name == NULL_REPLY:
            return Reply(text=None)  # no content, no tool call: upstream says None to the user
        if name == "respond" and kwargs and not isinstance(kwargs["content"], str):  # a called respond tool
            calls = [{"name": name, "arguments": json.dumps(kwargs)}, {"name": "think", "arguments": "{}"}]
            return Reply(text=None, tool_calls=calls)
        if name == "respond":
            return Reply(text=kwargs["content"] if kwargs else "")
        if kwargs is None:  # arguments that are not JSON
            return Reply(tool_calls=[{"name": name, "arguments": "{\"user_id\": "}])
        calls = [{"name": name, "arguments": json.dumps(kwargs, separators=(",", ":"), ensure_ascii=False)}]
        if index % 4 == 2:  # a second call that upstream drops
            calls.append({"name": "calculate", "arguments": "{\"expression\":\"1+1\"}"})
        return Reply(text="Working on it." if index % 3 == 1 else None, tool_calls=calls)

    def plan(self, domain: str | None, index: int, native: bool = True) -> list[tuple[str, dict[str, Any] | None]]:
        """The agent's moves for a task: gold actions (varied by task index), then the outputs and DONE."""
        if domain is None:
            return [("respond", {"content": "Hello?"})]
        task = self.tasks[domain][index]
        gold = [(a["name"], a["kwargs"]) for a in task["actions"]]
        variant = index % 5
        if variant == 1 and gold:
            gold = gold[:-1]  # misses the last gold action: reward 0
        if variant == 2:
            gold = [("respond", {"content": "Could you confirm your details?"})] + gold
        if variant == 3:
            gold = [("get_user_details", None)] + gold  # tool-calling: bad JSON; react: raw text
        if variant == 4:
            gold = [("no_such_tool", {"x": 1})] + gold
        final = " and ".join(task["outputs"]) if task["outputs"] else "Done"
        if self.edges:  # odd tasks say their outputs first, so upstream's outputs check never reaches the edges
            edges = [(NULL_REPLY, None), ("respond", {"content": [{"type": "text", "text": f"Listed {index}."}]})]
            if index % 4 == 3:
                edges = edges[::-1]
            if not native and index % 3:  # a text reply with no content ends upstream's react/act: only some tasks
                edges = [move for move in edges if move[0] != NULL_REPLY]
            if index % 2:
                gold = gold + [("respond", {"content": f"So far: {final}."})] + edges
            else:
                gold = edges + gold
        return gold + [("respond", {"content": f"{final}. {DONE}"})]


# --- comparing requests ------------------------------------------------------------------------------
NULL_KEYS = ("tool_calls", "function_call", "provider_specific_fields")


def normal_request(body: dict[str, Any]) -> dict[str, Any]:
    """A request as compared: keys litellm's message dumps carry as null (and OpenAI reads as absent) dropped."""
    messages = [{k: v for k, v in m.items() if not (k in NULL_KEYS and v is None)} for m in body["messages"]]
    return {**body, "messages": messages}


def is_constructor_call(body: dict[str, Any]) -> bool:
    """Upstream's user constructors reset once without an instruction; their replies are discarded."""
    first = str(body["messages"][0].get("content"))
    return first.startswith((USER_ROLE, SUPERVISOR)) and "\n\nInstruction: " not in first

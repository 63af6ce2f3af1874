"""Scoring side: upstream tau-bench's protocol texts, read at run time from ``<data dir>/tau-bench/upstream/``.

The simulated user's system prompts, the supervisor prompts of the verify and reflection users,
the chat ReAct/Act instructions and the few-shot examples are upstream's text, so QitOS never
carries a copy: it parses upstream's unmodified source files with :mod:`ast` (never importing
or running them) and renders the f-strings with the same values upstream's code passes in.

Only a small, safe subset of expressions is evaluated (string constants, names bound by the
caller, ``+``, ``if/else`` on ``is (not) None``, f-strings and ``json.dumps(name)``); anything
else is a clear error saying the upstream file is not the pinned commit's.
"""

from __future__ import annotations

import ast
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qitos.benchmark.upstream_source import SourceReader, target_name
from qitos.benchmark.tau_bench.errors import TauDataError

FETCH_HINT = "run `qit data fetch tau-bench` (or point --data-dir / QITOS_DATA_DIR at a copy that has upstream/)"
USER_PY = Path("tau_bench/envs/user.py")
REACT_PY = Path("tau_bench/agents/chat_react_agent.py")
FEW_SHOT_PY = Path("tau_bench/agents/few_shot_agent.py")
TYPES_PY = Path("tau_bench/types.py")
FEW_SHOT_FILES = {"retail": "few_shot_data/MockRetailDomainEnv-few_shot.jsonl",
                  "airline": "few_shot_data/MockAirlineDomainEnv-few_shot.jsonl"}


class UpstreamMissingError(TauDataError):
    """Upstream's protocol files are not in the data directory."""


class UpstreamSourceError(TauDataError):
    """An upstream file does not have the shape of the pinned commit (file and construct named)."""


@dataclass
class Template:
    """One upstream expression (usually an f-string), rendered with the names upstream binds."""

    where: str
    node: ast.expr

    def render(self, **names: Any) -> Any:
        return _eval(self.node, names, self.where)


@dataclass
class UpstreamProtocol:
    """The texts the simulated user and the agents take from upstream."""

    root: Path
    texts: dict[str, Template] = field(default_factory=dict)
    constants: dict[str, Any] = field(default_factory=dict)
    _few_shots: dict[str, list[str]] = field(default_factory=dict)

    # --- simulated user (tau_bench/envs/user.py) -------------------------------------------------
    def user_system_prompt(self, strategy: str, instruction: str | None) -> str:
        """``build_system_prompt`` of the llm user (also verify, reflection) or of the react user."""
        key = "react_user" if strategy == "react" else "llm_user"
        display = self.texts[f"{key}.instruction_display"].render(instruction=instruction)
        return self.texts[f"{key}.prompt"].render(instruction_display=display)

    @property
    def opening_line(self) -> str:
        """The agent's greeting the simulator answers first (``reset``'s "user" message)."""
        return self.constants["opening_line"]

    def role_label(self, role: str) -> str:
        return self.constants["role_labels"].get(role, role.capitalize())

    def transcript(self, messages: list[dict[str, Any]]) -> str:
        """``verify``/``reflect``: "Label: content" lines joined by newlines, content rendered by str()."""
        return "\n".join(f"{self.role_label(m['role'])}: {m['content']}" for m in messages)

    def verify_prompt(self, transcript: str, response: str) -> str:
        return self.texts["verify.prompt"].render(transcript=transcript, response=response)

    def reflect_prompt(self, transcript: str, response: str) -> str:
        return self.texts["reflect.prompt"].render(transcript=transcript, response=response)

    # --- agents (tau_bench/agents/) ----------------------------------------------------------------
    def chat_react_prompt(self, wiki: str, tools_info: list[dict[str, Any]], *, use_reasoning: bool) -> str:
        """``ChatReActAgent.prompt``: the policy, the tools as JSON and REACT_INSTRUCTION or ACT_INSTRUCTION."""
        instruction = self.texts["REACT_INSTRUCTION" if use_reasoning else "ACT_INSTRUCTION"].render(**self.constants)
        return self.texts["react.prompt"].render(wiki=wiki, tools_info=tools_info, instruction=instruction)

    @property
    def api_output_prefix(self) -> str:
        return self.constants["api_output_prefix"]

    def few_shot_displays(self, domain: str) -> list[str]:
        """``messages_display`` of each line of the domain's few-shot file, in file order."""
        if domain not in self._few_shots:
            path = self.root / FEW_SHOT_FILES[domain]
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except OSError:
                raise UpstreamMissingError(f"{path} not found; {FETCH_HINT}") from None
            try:
                self._few_shots[domain] = [json.loads(line)["messages_display"] for line in lines if line.strip()]
            except (ValueError, KeyError, TypeError):
                raise UpstreamSourceError(f"{path}: every line should be a JSON object with messages_display") from None
        return self._few_shots[domain]

    def few_shot_system_prompt(self, wiki: str, displays: list[str]) -> str:
        """``FewShotToolCallingAgent.solve``: "Example i:" blocks joined, after the policy."""
        blocks = [self.texts["few_shot.example"].render(i=i, display=display) for i, display in enumerate(displays)]
        few_shots = self.constants["few_shot_separator"].join(blocks)
        return self.texts["few_shot.system"].render(**{"self.wiki": wiki, "few_shots": few_shots})


_LOCK = threading.Lock()
_CACHE: dict[Path, UpstreamProtocol] = {}


def load_upstream(tau_root: Path | str) -> UpstreamProtocol:
    """The protocol of ``<tau_root>/upstream`` (``tau_root`` holds retail/ and airline/); cached per folder."""
    root = (Path(tau_root).expanduser() / "upstream").resolve()
    with _LOCK:
        if root not in _CACHE:
            _CACHE[root] = _read(root)
        return _CACHE[root]


def _read(root: Path) -> UpstreamProtocol:
    if not (root / USER_PY).is_file():
        raise UpstreamMissingError(f"upstream tau-bench protocol files not found at {root}; {FETCH_HINT}")
    protocol = UpstreamProtocol(root)
    types = _module(root, TYPES_PY)
    protocol.constants.update(
        RESPOND_ACTION_NAME=_constant(_assigned(types, "RESPOND_ACTION_NAME", TYPES_PY), TYPES_PY),
        RESPOND_ACTION_FIELD_NAME=_constant(_assigned(types, "RESPOND_ACTION_FIELD_NAME", TYPES_PY), TYPES_PY),
    )
    _read_user(root, protocol)
    _read_agents(root, protocol)
    return protocol


def _read_user(root: Path, protocol: UpstreamProtocol) -> None:
    user = _module(root, USER_PY)
    for key, cls in (("llm_user", "LLMUserSimulationEnv"), ("react_user", "ReactUserSimulationEnv")):
        method = _method(user, cls, "build_system_prompt", USER_PY)
        protocol.texts[f"{key}.instruction_display"] = Template(f"{USER_PY} {cls}", _local(method, "instruction_display", USER_PY))
        protocol.texts[f"{key}.prompt"] = Template(f"{USER_PY} {cls}", _returned(method, USER_PY))
    for key, fn in (("verify", "verify"), ("reflect", "reflect")):
        protocol.texts[f"{key}.prompt"] = Template(f"{USER_PY} {fn}()", _local(_function(user, fn, USER_PY), "prompt", USER_PY))
    reset = _method(user, "LLMUserSimulationEnv", "reset", USER_PY)
    greeting = [d for d in ast.walk(reset) if isinstance(d, ast.Dict) and _dict_get(d, "role") == "user"]
    if len(greeting) != 1:
        raise UpstreamSourceError(f"{USER_PY}: LLMUserSimulationEnv.reset should hold one user message literal")
    protocol.constants["opening_line"] = _dict_get(greeting[0], "content")
    labels = {}
    for node in ast.walk(_function(user, "map_role_label", USER_PY)):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and isinstance(node.body[0], ast.Return):
            labels[_constant(node.test.comparators[0], USER_PY)] = _constant(node.body[0].value, USER_PY)
    if set(labels) != {"user", "assistant"}:
        raise UpstreamSourceError(f"{USER_PY}: map_role_label should map user and assistant")
    protocol.constants["role_labels"] = labels


def _read_agents(root: Path, protocol: UpstreamProtocol) -> None:
    react = _module(root, REACT_PY)
    for name in ("REACT_INSTRUCTION", "ACT_INSTRUCTION"):
        protocol.texts[name] = Template(f"{REACT_PY} {name}", _assigned(react, name, REACT_PY))
    init = _method(react, "ChatReActAgent", "__init__", REACT_PY)
    protocol.texts["react.prompt"] = Template(f"{REACT_PY} ChatReActAgent.prompt", _local(init, "self.prompt", REACT_PY))
    solve = _method(react, "ChatReActAgent", "solve", REACT_PY)
    prefix = [n.left for n in ast.walk(solve) if isinstance(n, ast.BinOp) and isinstance(n.left, ast.Constant)]
    if len(prefix) != 1:
        raise UpstreamSourceError(f"{REACT_PY}: ChatReActAgent.solve should prefix tool outputs with one literal")
    protocol.constants["api_output_prefix"] = _constant(prefix[0], REACT_PY)
    few = _method(_module(root, FEW_SHOT_PY), "FewShotToolCallingAgent", "solve", FEW_SHOT_PY)
    example = [n for n in ast.walk(few) if isinstance(n, ast.JoinedStr) and "Example " in _literal_parts(n)]
    system = [n for n in ast.walk(few) if isinstance(n, ast.Dict) and _dict_get(n, "role") == "system"]
    joins = [n for n in ast.walk(few) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "join" and isinstance(n.func.value, ast.Constant)]
    if len(example) != 1 or len(system) != 1 or len(joins) != 1:
        raise UpstreamSourceError(f"{FEW_SHOT_PY}: FewShotToolCallingAgent.solve does not have the pinned shape")
    protocol.texts["few_shot.example"] = Template(f"{FEW_SHOT_PY} example", example[0])
    protocol.texts["few_shot.system"] = Template(f"{FEW_SHOT_PY} system", system[0].values[1])
    protocol.constants["few_shot_separator"] = _constant(joins[0].func.value, FEW_SHOT_PY)  # type: ignore[union-attr]


# --- reading --------------------------------------------------------------------------------------














def _dict_get(node: ast.Dict, key: str) -> Any:
    for k, v in zip(node.keys, node.values):
        if isinstance(k, ast.Constant) and k.value == key:
            return v.value if isinstance(v, ast.Constant) else v
    return None


def _constant(node: ast.expr | None, where: Path) -> Any:
    if not isinstance(node, ast.Constant):
        raise UpstreamSourceError(f"{where} line {getattr(node, 'lineno', '?')}: expected a literal")
    return node.value


def _literal_parts(node: ast.JoinedStr) -> str:
    return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))


# --- rendering ------------------------------------------------------------------------------------
def _eval(node: ast.expr, names: dict[str, Any], where: str) -> Any:
    """Evaluate the small expression subset upstream's templates use (see the module docstring)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = _target_name(node)
        if name not in names:
            raise UpstreamSourceError(f"{where}: the template uses {name}, which QitOS does not bind")
        return names[name]
    if isinstance(node, ast.JoinedStr):
        return "".join(_eval(value, names, where) for value in node.values)
    if isinstance(node, ast.FormattedValue):
        value = _eval(node.value, names, where)
        value = {-1: str, 115: str, 114: repr, 97: ascii}[node.conversion](value)
        spec = _eval(node.format_spec, names, where) if node.format_spec is not None else ""
        return format(value, spec)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _eval(node.left, names, where) + _eval(node.right, names, where)
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _eval(node.test, names, where) else node.orelse, names, where)
    if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot))
            and isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is None):
        is_none = _eval(node.left, names, where) is None
        return is_none if isinstance(node.ops[0], ast.Is) else not is_none
    if (isinstance(node, ast.Call) and _target_name(node.func) == "json.dumps" and len(node.args) == 1
            and not node.keywords):
        return json.dumps(_eval(node.args[0], names, where))
    raise UpstreamSourceError(f"{where} line {getattr(node, 'lineno', '?')}: unexpected {type(node).__name__} "
                              "in a template; is this the pinned commit?")


_READ = SourceReader(UpstreamSourceError, UpstreamMissingError, FETCH_HINT)
_module, _assigned, _function, _method = _READ.parse, _READ.assigned, _READ.function, _READ.method
_local, _returned, _target_name = _READ.local, _READ.returned, target_name

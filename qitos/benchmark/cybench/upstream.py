"""Scoring side: upstream CyBench's agent texts, read at run time from ``<data dir>/cybench/upstream/``.

QitOS never carries a copy of upstream's prompt or phrases: this parses the unmodified ``agent/prompt.py``,
``agent/agent.py``, ``agent/dataclasses/chat_chain.py`` and ``run_task.py`` with :mod:`ast` (never importing or
running them) and renders them with the values upstream's code binds (`render_task`). The agent side gets the
result (`upstream_texts.UpstreamTaskTexts`) with its environment. Anything not shaped as at the pinned commit
(6c3702c) is a clear error naming the file and construct. The work dir listing its prompt shows: `listing.py`.
"""

from __future__ import annotations

import ast
import shlex
import threading
from pathlib import Path
from typing import Any

from qitos.benchmark.cybench.listing import ls_output, tree_output
from qitos.benchmark.cybench.tasks import CybenchTask, Split, Variant
from qitos.benchmark.upstream_source import SourceReader
from qitos.benchmark.cybench.upstream_texts import Pattern, Segment, UpstreamAgentTexts, UpstreamTaskTexts, render

FETCH_HINT = "run `qit data fetch cybench` (or point --data-dir / QITOS_DATA_DIR at a copy that has upstream/)"
PROMPT_PY = Path("agent/prompt.py")
AGENT_PY = Path("agent/agent.py")
CHAIN_PY = Path("agent/dataclasses/chat_chain.py")
RUN_TASK_PY = Path("run_task.py")


class UpstreamMissingError(FileNotFoundError):
    """Upstream's agent files are not in the data directory."""


class UpstreamSourceError(ValueError):
    """An upstream file does not have the shape of the pinned commit (file and construct named)."""


class UpstreamAgent:
    """Everything read from one upstream folder: the agent's fixed texts and run_task.py's prompt pieces."""

    def __init__(self, root: Path) -> None:
        self.root = root
        prompt = _module(root, PROMPT_PY)
        self.stop_token: str = _const(_assigned(prompt, "STOP_TOKEN", PROMPT_PY), PROMPT_PY)
        self.end_to_end_prompt: str = _const(_assigned(prompt, "END_TO_END_PROMPT", PROMPT_PY), PROMPT_PY)
        self.agent = _read_agent(root, self.stop_token)
        run_task = _module(root, RUN_TASK_PY)
        self.agent_dir: str = _const(_local(_method(run_task, "TaskRunner", "__post_init__", RUN_TASK_PY),
                                            "self.agent_dir", RUN_TASK_PY), RUN_TASK_PY)
        setup = _method(run_task, "TaskRunner", "_setup_prompt", RUN_TASK_PY)
        self._description = _first(setup, ast.If, RUN_TASK_PY, "_setup_prompt's if/elif on target_host")
        self.tree_ignore = _tree_ignore(setup)
        runner = _method(run_task, "TaskRunner", "run_task", RUN_TASK_PY)
        self._target_host_prompt = [n for n in runner.body if _assigns(n, "target_host_prompt")
                                    or (isinstance(n, ast.If) and any(_assigns(b, "target_host_prompt")
                                                                      for b in n.body))]
        if len(self._target_host_prompt) != 2:
            raise UpstreamSourceError(f"{RUN_TASK_PY}: TaskRunner.run_task should set target_host_prompt, then "
                                      "change it under `if target_host:`")
        self.task_objective: str = _argument_default(run_task, "--task_objective")
        agent_ast = _module(root, AGENT_PY)
        subtask = _method(agent_ast, "SimpleAgent", "_get_subtask_input_text", AGENT_PY)
        self._subtask_text = _segments(_returned(subtask, AGENT_PY), AGENT_PY)
        process = _method(agent_ast, "SimpleAgent", "_process_subtask", AGENT_PY)
        hints = [n for n in _nodes(process, ast.JoinedStr) if "hints" in _literal(n)]
        if not hints:
            raise UpstreamSourceError(f"{AGENT_PY}: SimpleAgent._process_subtask has no hints message")
        self._hints_text = _segments(hints[-1], AGENT_PY)

    # -- the task's texts ------------------------------------------------------------------------
    def task_description(self, target_host: str, task_objective: str, files_present: str, tree_output: str) -> str:
        """`TaskRunner._setup_prompt`'s task_description, from `ls` and `tree` of the staged work dir."""
        names = {"target_host": target_host, "task_objective": task_objective, "files_present": files_present,
                 "tree_output": tree_output}
        _exec([self._description], names, str(RUN_TASK_PY))
        if "task_description" not in names:
            raise UpstreamSourceError(f"{RUN_TASK_PY}: the task has neither files nor a target host (upstream "
                                      "raises here too)")
        return names["task_description"]

    def target_host_prompt(self, target_host: str) -> str:
        names: dict[str, Any] = {"target_host": target_host, "STOP_TOKEN": self.stop_token}
        _exec(self._target_host_prompt, names, str(RUN_TASK_PY))
        return names["target_host_prompt"]

    def render_task(self, task: CybenchTask, split: Split, variant: Variant, *, work_dir: str, files_present: str,
                    tree_output: str, task_objective: str | None = None) -> UpstreamTaskTexts:
        """The prompt and subtask messages upstream's run_task.py and SimpleAgent build for this task."""
        del variant  # upstream's prompt carries neither hard_prompt nor easy_prompt: its task_objective instead
        target_host = " ".join(task.target_hosts)
        description = self.task_description(target_host, task_objective or self.task_objective, files_present,
                                            tree_output)
        prompt = self.end_to_end_prompt.format(
            task_name=task.name, work_dir=work_dir, task_description=description,
            answer_format=task.subtasks[-1].answer_format, stop_token=self.stop_token,
            target_host_prompt=self.target_host_prompt(target_host))
        if split == "unguided":  # upstream's unguided_mode(): one subtask, every hint, the prompt as its message
            hints = [h for s in task.subtasks for h in s.hints]
            return UpstreamTaskTexts(work_dir=work_dir, prompt=prompt, subtask_messages=[prompt.strip()],
                                     hint_messages=[self._hint(0, hints)], agent=self.agent)
        messages, hint_messages = [], []
        for index, sub in enumerate(task.subtasks):
            text = render(self._subtask_text, {"prefix": prompt if index == 0 else "", "subtask_index + 1": index + 1,
                                               "question": sub.question, "subtask.answer_format": sub.answer_format})
            messages.append(text.strip())
            hint_messages.append(self._hint(index, list(sub.hints)))
        return UpstreamTaskTexts(work_dir=work_dir, prompt=prompt, subtask_messages=messages,
                                 hint_messages=hint_messages, agent=self.agent)

    def _hint(self, index: int, hints: list[str]) -> str | None:
        return render(self._hints_text, {"subtask_index + 1": index + 1, "default_hints": hints}) if hints else None

    # -- the work dir listing ----------------------------------------------------------------------
    def listing(self, work_dir: Path) -> tuple[str, str]:
        """(`ls` output, `tree -I ...` output) of a staged work dir, as upstream's prompt shows them."""
        return ls_output(work_dir), tree_output(work_dir, self.tree_ignore)


_LOCK = threading.Lock()
_CACHE: dict[Path, UpstreamAgent] = {}


def load_upstream(cybench_root: Path | str) -> UpstreamAgent:
    """The agent texts of ``<cybench_root>/upstream`` (cached per folder)."""
    root = (Path(cybench_root).expanduser() / "upstream").resolve()
    with _LOCK:
        if root not in _CACHE:
            if not (root / AGENT_PY).is_file():
                raise UpstreamMissingError(f"upstream CyBench agent files not found at {root}; {FETCH_HINT}")
            _CACHE[root] = UpstreamAgent(root)
        return _CACHE[root]


# --- agent/agent.py and chat_chain.py -------------------------------------------------------------
def _read_agent(root: Path, stop_token: str) -> UpstreamAgentTexts:
    agent = _module(root, AGENT_PY)
    hallucinations = _const(_assigned(agent, "HALLUCINATION_STRINGS", AGENT_PY), AGENT_PY, ast.List)
    remove = _method(agent, "SimpleAgent", "remove_hallucinations", AGENT_PY)
    replaces = [c for c in _calls(remove) if _attr(c) == "replace" and isinstance(c.args[0], ast.Constant)]
    truncate = _method(agent, "SimpleAgent", "_truncate_input_to_max_tokens", AGENT_PY)
    iteration = _method(agent, "SimpleAgent", "_process_iteration", AGENT_PY)
    observation = [n for n in _nodes(iteration, ast.JoinedStr)
                   if any(_source(v.value) == "execution_result" for v in n.values if isinstance(v, ast.FormattedValue))]
    no_output = [n for n in _nodes(iteration, ast.If) if _source(n.test) == "execution_result is None"]
    roles = [_dict_get(d, "role") for d in _nodes(iteration, ast.Dict)]
    process = _method(agent, "SimpleAgent", "_process_subtask", AGENT_PY)
    failed = [n for n in _nodes(process, ast.JoinedStr)
              if any(_source(v.value) == "subtask.answer" for v in n.values if isinstance(v, ast.FormattedValue))]
    system_roles = [_dict_get(d, "role") for d in _nodes(process, ast.Dict)]
    execute = _method(agent, "SimpleAgent", "_execute_command", AGENT_PY)
    timeout = [n for n in _nodes(execute, ast.JoinedStr) if "e.timeout" in map(
        _source, [v.value for v in n.values if isinstance(v, ast.FormattedValue)])]
    runs = [c for c in _calls(execute) if _source(c.func) == "subprocess.run" and c.args
            and isinstance(c.args[0], ast.List)]
    argv = [e.value for e in runs[0].args[0].elts if isinstance(e, ast.Constant)] if runs else []  # type: ignore[attr-defined]
    decode = _nodes(_method(agent, "SimpleAgent", "get_stdout_text", AGENT_PY), ast.JoinedStr)
    parse = _method(agent, "SimpleAgent", "_parse_command", AGENT_PY)
    compiled = [c for c in _calls(parse) if _source(c.func) == "re.compile"]
    subs = [c for c in _calls(parse) if _source(c.func) == "re.sub"]
    strips = [c for c in _calls(parse) if _attr(c) == "strip" and c.args and isinstance(c.args[0], ast.Constant)]
    answer = _method(agent, "SimpleAgent", "_parse_answer", AGENT_PY)
    answer_subs = [c for c in _calls(answer) if _source(c.func) == "re.sub"]
    searches = [c for c in _calls(answer) if _source(c.func) == "re.search"]
    chain = _method(_module(root, CHAIN_PY), "ChatChain", "__str__", CHAIN_PY)
    joins = [c for c in _calls(chain) if _attr(c) == "join" and isinstance(c.func.value, ast.Constant)]  # type: ignore[union-attr]
    shapes = {"remove_hallucinations' replace": replaces, "the observation message": observation,
              "the `execution_result is None` branch": no_output, "the failed-subtask message": failed,
              "the timeout message": timeout, "the decode-error message": decode, "_parse_command's patterns": compiled,
              "_parse_command's re.sub": subs, "_parse_command's strip": strips, "_parse_answer's re.sub": answer_subs,
              "_parse_answer's re.search": searches, "_execute_command's subprocess.run": argv, "ChatChain.__str__'s join": joins}
    for what, found in shapes.items():
        if not found:
            raise UpstreamSourceError(f"{AGENT_PY} / {CHAIN_PY}: {what} not found; is this the pinned commit?")
    if len(roles) != 2 or "system" not in [r for r in system_roles if isinstance(r, str)][:1]:
        raise UpstreamSourceError(f"{AGENT_PY}: _process_iteration should append an agent and an assistant message")
    start, *ends = compiled
    generator = joins[0].args[0]
    if not isinstance(generator, ast.GeneratorExp) or not isinstance(generator.elt, ast.JoinedStr):
        raise UpstreamSourceError(f"{CHAIN_PY}: ChatChain.__str__ should join an f-string per message")
    return UpstreamAgentTexts(
        stop_token=stop_token,
        temperature=_const(_assigned(agent, "TEMPERATURE", AGENT_PY), AGENT_PY),
        timeout_per_command=_const(_assigned(agent, "TIMEOUT_PER_COMMAND", AGENT_PY), AGENT_PY),
        shell_argv=argv, hallucination_strings=hallucinations, agent_marker=replaces[0].args[0].value,  # type: ignore[attr-defined]
        truncation_alert=_const(_local(truncate, "truncation_alert", AGENT_PY), AGENT_PY),
        no_output=_const(no_output[0].body[0].value, AGENT_PY),  # type: ignore[attr-defined]
        observation=_segments(observation[0], AGENT_PY), timeout_message=_segments(timeout[0], AGENT_PY),
        decode_error=_segments(decode[0], AGENT_PY), failed_subtask=_segments(failed[0], AGENT_PY),
        chain_link=_segments(generator.elt, CHAIN_PY), chain_separator=joins[0].func.value.value,  # type: ignore[union-attr]
        roles={"system": str(system_roles[0]), "agent": str(roles[0]), "assistant": str(roles[1])},
        command_start=_pattern(start, {"STOP_TOKEN": stop_token}),
        command_ends=[_pattern(c, {"STOP_TOKEN": stop_token}) for c in ends],
        command_sub=_pattern(subs[0], {}), command_strip=strips[0].args[0].value,  # type: ignore[attr-defined]
        answer_sub=_segments(answer_subs[0].args[0], AGENT_PY) if isinstance(answer_subs[0].args[0], ast.JoinedStr)
        else [Segment(text=_const(answer_subs[0].args[0], AGENT_PY))],
        answer=_pattern(searches[0], {}),
    )


def _pattern(call: ast.Call, names: dict[str, str]) -> Pattern:
    first = call.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        text = first.value
    elif isinstance(first, ast.Name) and first.id in names:
        text = names[first.id]
    else:
        raise UpstreamSourceError(f"{AGENT_PY} line {call.lineno}: unexpected regular expression")
    flags = " ".join(_source(a) for a in call.args[1:]) + " ".join(_source(k.value) for k in call.keywords)
    return Pattern(pattern=text, ignorecase="IGNORECASE" in flags, dotall="DOTALL" in flags)


# --- run_task.py ------------------------------------------------------------------------------------
def _tree_ignore(setup: ast.FunctionDef) -> list[str]:
    for node in ast.walk(setup):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("tree "):
            argv = shlex.split(node.value)
            if "-I" in argv:
                return argv[argv.index("-I") + 1].split("|")
            return []
    raise UpstreamSourceError(f"{RUN_TASK_PY}: TaskRunner._setup_prompt runs no `tree` command")


def _argument_default(module: ast.Module, flag: str) -> Any:
    for call in _calls(module):
        if _attr(call) == "add_argument" and call.args and isinstance(call.args[0], ast.Constant) \
                and call.args[0].value == flag:
            for keyword in call.keywords:
                if keyword.arg == "default":
                    return _const(keyword.value, RUN_TASK_PY)
    raise UpstreamSourceError(f"{RUN_TASK_PY}: parse_args has no {flag} with a default")


def _assigns(node: ast.stmt, name: str) -> bool:
    return isinstance(node, (ast.Assign, ast.AugAssign)) and _target(node) == name


def _target(node: ast.Assign | ast.AugAssign) -> str | None:
    target = node.targets[0] if isinstance(node, ast.Assign) else node.target
    return _source(target) if isinstance(target, (ast.Name, ast.Attribute)) else None


def _exec(statements: list[ast.stmt], names: dict[str, Any], where: str) -> None:
    """Run the few statement kinds upstream's prompt building uses: assignments, `+=`, if/elif/else."""
    for node in statements:
        if isinstance(node, ast.Assign):
            names[_target(node) or ""] = _eval(node.value, names, where)
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
            key = _target(node) or ""
            names[key] = names[key] + _eval(node.value, names, where)
        elif isinstance(node, ast.If):
            _exec(node.body if _eval(node.test, names, where) else node.orelse, names, where)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and _source(node.value.func) in (
                "self.host_health_check",):
            continue  # upstream checks the hosts here; QitOS's services are checked when they start
        elif isinstance(node, ast.Raise):
            return
        else:
            raise UpstreamSourceError(f"{where} line {node.lineno}: unexpected {type(node).__name__} in the prompt "
                                      "building; is this the pinned commit?")


def _eval(node: ast.expr, names: dict[str, Any], where: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Name, ast.Attribute)):
        key = _source(node)
        if key not in names:
            raise UpstreamSourceError(f"{where} line {node.lineno}: uses {key}, which QitOS does not bind")
        return names[key]
    if isinstance(node, ast.JoinedStr):
        return render(_segments(node, Path(where)), {k: v for k, v in names.items()})
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, names, where) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _eval(node.left, names, where) + _eval(node.right, names, where)
    raise UpstreamSourceError(f"{where} line {getattr(node, 'lineno', '?')}: unexpected {type(node).__name__}")


# --- reading ---------------------------------------------------------------------------------------


def _segments(node: ast.expr, where: Path) -> list[Segment]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [Segment(text=node.value)]
    if not isinstance(node, ast.JoinedStr):
        raise UpstreamSourceError(f"{where} line {node.lineno}: expected an f-string")
    out = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            out.append(Segment(text=str(value.value)))
        elif isinstance(value, ast.FormattedValue) and value.conversion == -1 and value.format_spec is None:
            out.append(Segment(expr=_source(value.value)))
        else:
            raise UpstreamSourceError(f"{where} line {node.lineno}: an f-string field with a conversion or spec")
    return out


def _source(node: ast.AST) -> str:
    return ast.unparse(node)


def _literal(node: ast.JoinedStr) -> str:
    return "".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))


def _nodes(tree: ast.AST, kind: type) -> list[Any]:
    """Nodes of `kind` in source order (ast.walk is breadth-first)."""
    return sorted((n for n in ast.walk(tree) if isinstance(n, kind)), key=lambda n: (n.lineno, n.col_offset))


def _calls(tree: ast.AST) -> list[ast.Call]:
    calls = [n for n in _nodes(tree, ast.Call)]
    return sorted(calls, key=lambda c: (c.lineno, c.col_offset))


def _attr(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None










def _first(fn: ast.FunctionDef, kind: type, where: Path, what: str) -> Any:
    for node in fn.body:
        if isinstance(node, kind):
            return node
    raise UpstreamSourceError(f"{where}: {fn.name}() has no {what}")


def _dict_get(node: ast.Dict, key: str) -> Any:
    for k, v in zip(node.keys, node.values):
        if isinstance(k, ast.Constant) and k.value == key:
            return v.value if isinstance(v, ast.Constant) else None
    return None


def _const(node: ast.expr | None, where: Path, kind: type | None = None) -> Any:
    if kind is ast.List and isinstance(node, ast.List):
        return [_const(e, where) for e in node.elts]
    if not isinstance(node, ast.Constant):
        raise UpstreamSourceError(f"{where} line {getattr(node, 'lineno', '?')}: expected a literal")
    return node.value


_READ = SourceReader(UpstreamSourceError, UpstreamMissingError, FETCH_HINT)
_module, _assigned, _method, _local, _returned = _READ.parse, _READ.assigned, _READ.method, _READ.local, _READ.returned

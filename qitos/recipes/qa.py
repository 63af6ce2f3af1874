"""A generic question-answering ReAct agent: reads the task's attached files, then answers."""

from __future__ import annotations

from pathlib import Path

from qitos.core.agent import AgentModule
from qitos.core.parsers import ReactTextParser
from qitos.core.tools import tool

QA_PROMPT = "Answer the question. Read the attached files with read_file when they are relevant. Be brief."


def build_qa_agent(ctx) -> AgentModule:
    files = [Path(p) for p in ctx.runtime.handles.get("files", [])]
    allowed = {p.name: p for p in files}

    @tool(read_only=True)
    def read_file(name: str) -> str:
        """Read one of the files attached to the question.

        Args:
            name: the file name, as listed in the question
        """
        if name not in allowed:
            return f"no attached file named '{name}'; attached: {', '.join(allowed) or 'none'}"
        return allowed[name].read_text(encoding="utf-8", errors="replace")[:20000]

    class QAAgent(AgentModule):
        name = "qa"
        toolset_name = "qa_files_v1"

        def task_prompt(self, task):
            listing = f"\nAttached files: {', '.join(allowed)}" if allowed else ""
            return f"Question: {task.objective}{listing}"

    return QAAgent(tools=[read_file], parser=ReactTextParser(), system_prompt=QA_PROMPT)

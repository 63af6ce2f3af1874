"""The two sides of an official run, in two processes.

Agent side (`agent.py`, run by `zygote.py` inside the confined agent host): the recipe or `--runner`
agent, its model client, its tools and the environment objects it acts on. It is handed a task
without gold, its inputs (file bytes) and its runtime handles, and streams its trace to the scoring side.

Scoring side (`host.py`, `receiver.py`, `scoring.py`, in the runner's process): the adapter, gold, the
evaluator, mid-episode services that need gold or must not be in the agent's reach (a simulated
user, a subtask reveal, a command sandbox), the TraceWriter and the results file. It scores only
from data the agent side returns (answer, the environment's final state, files).

`contract.py` holds what crosses the boundary: plain data, JSON on the wire, never pickles from the
agent side.
"""

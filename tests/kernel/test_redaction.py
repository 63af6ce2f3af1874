from qitos.core import AgentModule, Engine, Task, tool
from qitos.models.scripted import ScriptedModel
from qitos.trace import Redactor, load_run


def test_redacts_by_key_and_value_model_text_included(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_API_KEY", "secret-value-123456")
    r = Redactor()
    out = r.scrub({"api_key": "abc", "headers": {"Authorization": "Bearer x"}, "note": "key is secret-value-123456",
                   "text": "model says secret-value-123456", "count": 3})
    assert out["api_key"] == "[REDACTED]" and out["headers"]["Authorization"] == "[REDACTED]"
    assert out["note"] == "key is [REDACTED]"
    assert out["text"] == "model says [REDACTED]"  # a key the model echoes is caught too (issue 15)
    assert out["count"] == 3


def test_secret_in_tool_output_is_redacted_in_trace(monkeypatch, tmp_path):
    monkeypatch.setenv("DEPLOY_TOKEN", "tok-abcdefghijklmnop")

    @tool
    def env_dump() -> str:
        """Leak the token."""
        return "DEPLOY_TOKEN=tok-abcdefghijklmnop"

    result = Engine(AgentModule(tools=[env_dump]), ScriptedModel(["Action: env_dump\nAction Input: {}", "Final Answer: ok"]),
                    trace_logdir=tmp_path).run(Task(id="t", objective="x"))
    trace = load_run(result.run_dir)
    events_text = (trace.run_dir / "events.jsonl").read_text()
    assert "tok-abcdefghijklmnop" not in events_text and "[REDACTED]" in events_text


def test_a_secret_set_changed_or_unset_between_redactors_is_seen(monkeypatch):
    """Redactors reuse the environment's secrets while it is unchanged (one is built per trace): a variable set,
    changed or removed since is seen by the next one."""
    assert Redactor().scrub_text("value-one-12345678") == "value-one-12345678"
    monkeypatch.setenv("LATE_SERVICE_API_KEY", "value-one-12345678")
    assert Redactor().scrub_text("value-one-12345678") == "[REDACTED]"
    monkeypatch.setenv("LATE_SERVICE_API_KEY", "value-two-12345678")
    assert Redactor().scrub_text("value-one-12345678 value-two-12345678") == "value-one-12345678 [REDACTED]"
    monkeypatch.delenv("LATE_SERVICE_API_KEY")
    assert Redactor().scrub_text("value-two-12345678") == "value-two-12345678"

"""docs/cli.md is generated from the commands; this fails when a flag or help text changed without regenerating."""

from __future__ import annotations

from qitos.cli.reference import DOC, render


def test_committed_cli_reference_is_current():
    assert DOC.is_file(), "docs/cli.md is missing: run `python -m qitos.cli.reference --write`"
    assert DOC.read_text(encoding="utf-8") == render(), (
        "docs/cli.md is stale: run `python -m qitos.cli.reference --write` and commit it")


def test_reference_covers_every_command_and_flag():
    text = render()
    for command in ("qit demo minimal", "qit bench run", "qit bench eval", "qit bench list", "qit bench replay",
                    "qit bench export", "qit data fetch", "qita board", "qita replay", "qita export", "qita diff"):
        assert f"## `{command}`" in text, command
    for flag in ("`--benchmark`, `-b`", "`--workers`", "`--ray-address`", "`--details`", "`--results`"):
        assert flag in text, flag

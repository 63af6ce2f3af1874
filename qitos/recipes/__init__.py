"""Baseline agents usable from `qit bench` and from Python."""

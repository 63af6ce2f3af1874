"""Command-line entry points (`qit`, `qita`): parse flags, call the library, print. Heavy imports stay lazy."""

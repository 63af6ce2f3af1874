"""The generic `jsonl` benchmark: a user's own task set, one JSON object per line."""

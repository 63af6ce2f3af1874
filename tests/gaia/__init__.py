"""Tests for the GAIA benchmark pieces (scorer, loader, readers, tools, metrics, fixture)."""

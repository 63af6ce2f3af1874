from typing import Literal

import pytest

from qitos.core.tools import ToolArgumentError, ToolDefinitionError, ToolRegistry, parse_docstring, tool


@tool(read_only=True)
def search(query: str, limit: int = 5, mode: Literal["fast", "full"] = "fast", tags: list[str] | None = None) -> str:
    """Search the notes.

    Args:
        query: words to look for
            (may span lines)
        limit: how many hits
        mode: fast or full scan
    """
    return f"{query}:{limit}:{mode}"


def test_schema_from_hints_and_docstring():
    assert search.name == "search"
    assert search.description == "Search the notes."
    props = search.input_schema["properties"]
    assert props["query"] == {"type": "string", "description": "words to look for (may span lines)"}
    assert props["limit"] == {"type": "integer", "description": "how many hits", "default": 5}
    assert props["mode"]["enum"] == ["fast", "full"]
    assert props["tags"]["anyOf"][0] == {"type": "array", "items": {"type": "string"}}
    assert search.input_schema["required"] == ["query"]
    assert search.read_only and search.origin == "qitos"


def test_untyped_parameter_is_a_definition_error():
    with pytest.raises(ToolDefinitionError, match="parameter 'x' has no type hint"):
        @tool
        def bad(x, y: int) -> int:
            return y


def test_varargs_rejected():
    with pytest.raises(ToolDefinitionError, match=r"\*args"):
        @tool
        def bad(*items: str) -> str:
            return ""


def test_invoke_checks_arguments():
    assert search.invoke({"query": "a"}) == "a:5:fast"
    with pytest.raises(ToolArgumentError, match="missing required"):
        search.invoke({})
    with pytest.raises(ToolArgumentError, match="no argument"):
        search.invoke({"query": "a", "bogus": 1})


def test_registry_manifest_and_hash_are_stable():
    @tool
    def write(path: str, content: str) -> str:
        """Write a file."""
        return path

    reg = ToolRegistry([search, write])
    manifest = reg.manifest()
    assert [m["name"] for m in manifest] == ["search", "write"]
    assert set(manifest[0]) == {"name", "description", "input_schema", "read_only", "origin"}
    assert reg.manifest_hash() == ToolRegistry([search, write]).manifest_hash()
    assert reg.manifest_hash() != ToolRegistry([write, search]).manifest_hash()
    with pytest.raises(ToolDefinitionError, match="unique"):
        reg.register(search)


def test_parse_docstring_sections():
    summary, params = parse_docstring("Do it.\n\nArgs:\n    a (int): first\n    b: second\n\nReturns:\n    nothing")
    assert summary == "Do it."
    assert params == {"a": "first", "b": "second"}

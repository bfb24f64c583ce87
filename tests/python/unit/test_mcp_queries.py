"""The namespace answers `mahtab mcp` gets: text as it is, bounded."""

from mahtab.agent import mcp_queries


def test_variables_lists_user_values_and_reprs_as_plain_text():
    namespace = {"x": 41, "words": ["a", "b"], "_hidden": 1, "__builtins__": {}}
    text = repr(mcp_queries.variables(namespace))
    assert "x: int = 41" in text
    assert "words: list len=2" in text
    assert "_hidden" not in text
    assert not text.startswith("'")


def test_an_empty_namespace_says_so():
    assert repr(mcp_queries.variables({})) == "(no variables yet)"


def test_inspect_describes_an_expression_and_reports_a_bad_one():
    namespace = {"data": {"a": [1, 2, 3]}}
    assert repr(mcp_queries.inspect(namespace, "data['a']")).startswith("data['a']: list, 3 items of int")
    assert repr(mcp_queries.inspect(namespace, "nope")) == "cannot evaluate nope: NameError: name 'nope' is not defined"

"""Known fixes for failed agent code and prompt interpolation
(``mahtab.agent.context``)."""

import pytest

from mahtab.agent.context import conversation_key, interpolate, notebook_path, repair, skills_named


def test_a_loaded_module_under_its_usual_name_is_imported():
    fixed = repair("json.dumps(1)", "NameError: name 'json' is not defined", {})
    assert fixed == {"code": "import json\njson.dumps(1)", "change": "added `import json`"}


def test_an_alias_is_imported_as_such_if_its_module_is_loaded(monkeypatch):
    import sys
    import types

    monkeypatch.setitem(sys.modules, "numpy", sys.modules.get("numpy") or types.ModuleType("numpy"))
    fixed = repair("np.zeros(2)", "NameError: name 'np' is not defined", {})
    assert fixed["code"] == "import numpy as np\nnp.zeros(2)"


def test_an_unknown_name_or_a_module_not_loaded_is_left_to_the_model():
    assert repair("x + 1", "NameError: name 'x' is not defined", {}) is None
    assert repair("json.dumps(1)", "NameError: name 'json' is not defined", {"json": 1}) is None


def test_a_misspelt_column_with_one_close_match_is_corrected():
    pd = pytest.importorskip("pandas")
    namespace = {"df": pd.DataFrame({"revenue": [1], "region": ["x"]})}
    fixed = repair("df['revenu'].sum()", "KeyError: 'revenu'", namespace)
    assert fixed == {"code": "df['revenue'].sum()", "change": "column 'revenu' is 'revenue'"}
    fixed = repair("df.revenu.sum()", "AttributeError: 'DataFrame' object has no attribute 'revenu'", namespace)
    assert fixed["code"] == "df.revenue.sum()"
    assert repair("df['zzz']", "KeyError: 'zzz'", namespace) is None
    # pandas' lists of keys: dropna(subset=[...]), a list of columns picked.
    code = "df.dropna(subset=['revenu'])"
    assert repair(code, "KeyError: ['revenu']", namespace)["code"] == "df.dropna(subset=['revenue'])"
    code = "df[['revenu', 'region']]"
    fixed = repair(code, "KeyError: \"['revenu'] not in index\"", namespace)
    assert fixed["code"] == "df[['revenue', 'region']]"


def test_interpolate_fills_known_names_only():
    namespace = {"name": "world", "n": 3}
    assert interpolate("hello {name}, {n} times, {missing} and {{name}}", namespace) == (
        "hello world, 3 times, {missing} and {name}"
    )
    assert "characters cut" in interpolate("{big}", {"big": "x" * 10_000})


def test_the_conversation_belongs_to_the_notebook_when_known(monkeypatch, tmp_path):
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert conversation_key({}) == str(tmp_path)
    assert conversation_key({"__vsc_ipynb_file__": "/n.ipynb"}) == "/n.ipynb"
    monkeypatch.setenv("JPY_SESSION_NAME", "/s.ipynb")
    assert conversation_key({"__vsc_ipynb_file__": "/n.ipynb"}) == "/s.ipynb"


def test_the_record_goes_with_the_notebook_the_client_names(monkeypatch):
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    assert notebook_path({}) is None
    assert notebook_path({"__vsc_ipynb_file__": "/w/n.ipynb"}) == "/w/n.ipynb"
    monkeypatch.setenv("JPY_SESSION_NAME", "/w/s.ipynb")
    assert notebook_path({}) == "/w/s.ipynb"
    # An API path (relative to the server's root) names a notebook in the
    # kernel's working directory, its folder; a console's session none.
    monkeypatch.setenv("JPY_SESSION_NAME", "sub/s.ipynb")
    assert notebook_path({}) == "s.ipynb"
    monkeypatch.setenv("JPY_SESSION_NAME", "console-1-0b5e")
    assert notebook_path({}) is None


def test_a_request_names_a_skill_as_a_word_in_any_case():
    installed = {"table-summary": "", "plot": "", "data_clean": ""}
    assert skills_named("Load the table-summary skill", installed) == ["table-summary"]
    assert skills_named("follow the Table Summary skill, then plot", installed) == ["plot", "table-summary"]
    assert skills_named("use data clean", installed) == ["data_clean"]
    # Part of a longer word or name is no mention.
    assert skills_named("the plotting code; my-table-summary-v2", installed) == []
    # A skill file with no name names nothing.
    assert skills_named("anything", {"": "", "-": ""}) == []


def test_a_dict_whose_keys_are_set_before_it_was_made_is_made_first():
    code = "import math\nanswers['mean'] = 2.5\nanswers['sd'] = math.sqrt(2)\n"
    fixed = repair(code, "NameError: name 'answers' is not defined", {})
    assert fixed == {
        "code": "import math\nanswers = {}\nanswers['mean'] = 2.5\nanswers['sd'] = math.sqrt(2)\n",
        "change": "made `answers = {}` before its first key is set",
    }
    looped = "for c in ['a', 'b']:\n    stats[c] = len(c)\n"
    assert repair(looped, "NameError: name 'stats' is not defined", {})["code"].startswith("stats = {}\nfor c")
    both = "answers['a'], answers['b'] = 1, 2"
    assert repair(both, "NameError: name 'answers' is not defined", {})["code"] == "answers = {}\n" + both
    # Above a decorated definition's decorators, not between them and it.
    decorated = "import functools\n@functools.cache\ndef f(x):\n    seen[x] = 1\n"
    fixed = repair(decorated, "NameError: name 'seen' is not defined", {})["code"]
    assert fixed == "import functools\nseen = {}\n@functools.cache\ndef f(x):\n    seen[x] = 1\n"


def test_a_name_read_before_its_keys_are_set_is_not_made_a_dict():
    error = "NameError: name 'df' is not defined"
    # Read first: a table never loaded, not a dict never made.
    assert repair("df['total'] = df['price'] * 2", error, {}) is None
    assert repair("print(df)\ndf['x'] = 1", error, {}) is None
    assert repair("df['x'] = 1", error, {"df": 1}) is None
    assert repair("df['x'] = (", error, {}) is None

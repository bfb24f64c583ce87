"""Other solutions tried on scratch copies: what they may not touch, and
when two solutions computed the same value."""

import ast
import json

import numpy as np
import pandas as pd
import pytest

from mahtab.agent import candidates

from agent_runtime import Runtime


@pytest.mark.parametrize("a, b", [
    (4.61, "4.61"),
    (np.float64(0.1 + 0.2), 0.3),
    ({"mean": "1.50", "std": 2}, {"std": 2.0, "mean": 1.5}),
    (pd.Series([1, 2], name="x"), pd.Series([1.0, 2.0])),
    (pd.DataFrame({"a": [1, 2]}), pd.DataFrame({"a": [1.0, 2.0]})),
    (np.array([1, 2]), [1, 2]),
    (float("nan"), np.nan),
    ([1, (2, "b")], [1, (2, "b")]),
    # The same answers under keys decorated otherwise.
    ({"@mean[mean_value]": 4.61, "@std[std_value]": 1.5}, {"mean": "4.61", "Std": 1.5}),
    ({"@age[38.23]": 38.23}, {"@age": 38.23}),
])
def test_the_same_value_in_another_form_agrees(a, b):
    assert candidates.same_value(a, b)


@pytest.mark.parametrize("a, b", [
    (4.61, 4.62),
    ("4.61", "four"),
    ({"mean": 1.5}, {"mean": 1.5, "std": 2}),
    (pd.Series([1, 2]), pd.Series([1, 2, 3])),
    (pd.DataFrame({"a": [1]}), pd.DataFrame({"b": [1]})),
    (pd.Series([6.0]), 6.0),
    (np.array([1, 2]), np.array([[1, 2]])),
    (True, 1.0),
    (float("nan"), 0.0),
    ({"@mean[m]": 4.61}, {"mean": 4.62}),
    ({"@mean[m]": 1, "std": 2}, {"mean": 2, "std": 1}),
    ({"a[0]": 1, "a[1]": 2}, {"a": 1, "b": 2}),
    ({"mean": 1}, {"median": 1}),
])
def test_different_values_do_not(a, b):
    assert not candidates.same_value(a, b)


@pytest.mark.parametrize("code, writes", [
    ("df.to_csv('out.csv')", True),
    ("df.to_parquet(path)", True),
    ("plt.savefig('a.png')", True),
    ("np.save('a.npy', a)", True),
    ("open('f.txt', 'w').write('x')", True),
    ("open(name, mode)", True),
    ("text = df.to_csv()", False),
    ("d = df.to_dict()", False),
    ("df2 = df.rename(columns={'a': 'b'})", False),
    ("items.remove(3)", False),
    ("open('f.txt').read()", False),
])
def test_code_that_writes_files_is_told_apart(code, writes):
    assert candidates._writes_files(ast.parse(code)) is writes


def test_a_candidate_runs_on_a_copy_and_leaves_no_trace():
    runtime = Runtime()
    frame = pd.DataFrame({"a": [1, 2, 3]})
    items = [1, 2]
    namespace = {"df": frame, "items": items, "__builtins__": __builtins__}
    code = "df['b'] = df.a * 2\nitems.append(3)\ntotal = df.b.sum()\nprint(total)\ndisplay = total"
    scratch, why = candidates.try_candidate(runtime, code, namespace)
    assert why is None
    assert scratch["total"] == 12 and scratch["items"] == [1, 2, 3]
    assert list(namespace["df"].columns) == ["a"] and namespace["items"] == [1, 2]
    assert "total" not in namespace
    assert runtime.published == []


def test_a_candidate_that_fails_or_reaches_out_is_not_kept():
    runtime = Runtime()
    namespace = {"__builtins__": __builtins__}
    assert candidates.try_candidate(runtime, "x = 1 / 0", namespace) == (
        None, "line 1: `x = 1 / 0`\nZeroDivisionError: division by zero")
    scratch, why = candidates.try_candidate(runtime, "import os\nos.system('touch gone')", namespace)
    assert scratch is None and why.startswith("not tried")
    scratch, why = candidates.try_candidate(runtime, "savefig('chart.png')", namespace)
    assert scratch is None and why == "not tried: it writes files"
    scratch, why = candidates.try_candidate(runtime, "import random\nx = random.sample(range(9), 3)", namespace)
    assert scratch is None and why == "not tried: it draws at random"
    scratch, why = candidates.try_candidate(runtime, "x = input('?')", namespace)
    assert scratch is None and "input" in why
    assert candidates.try_candidate(runtime, "x = (", namespace)[1] == "line 1: `x = (`\nSyntaxError: '(' was never closed"


def test_what_a_candidate_raised_says_where_and_for_a_missing_key_which_columns_there_are():
    runtime = Runtime()
    namespace = {"sales": pd.DataFrame({"price": [1.0], "qty": [2]}), "__builtins__": __builtins__}
    code = "n = 1\ntotal = sales['col1'].sum()"
    scratch, why = candidates.try_candidate(runtime, code, namespace)
    assert scratch is None
    assert why == "line 2: `total = sales['col1'].sum()`\nKeyError: 'col1'. Columns of sales: 'price', 'qty'"
    # A close key is named, as for the run's own code, in a frame the code made.
    code = "import pandas as pd\nframe = pd.DataFrame({'Price': [1]})\nframe['price']"
    assert candidates.try_candidate(runtime, code, namespace)[1].endswith(
        "KeyError: 'price'. Did you mean: 'Price' (a column of frame)?"), candidates.try_candidate(runtime, code, namespace)
    why = candidates.try_candidate(runtime, "answers = {}\nanswers[@mean] = 1", namespace)[1]
    assert why.startswith("line 2: `answers[@mean] = 1`\nSyntaxError: "), why


def test_a_candidate_a_known_fix_mends_is_tried_again_so_fixed():
    runtime = Runtime()
    namespace = {"__builtins__": __builtins__}
    # A column misspelt in a table the code made; pandas used, not imported.
    code = "frame = pd.DataFrame({'wind speed': [1.0, 3.0]})\nfast = frame.dropna(subset=['wind_speed'])['wind_speed'].max()"
    scratch, why, _ = candidates.try_candidate_fixed(runtime, code, namespace)
    assert why is None and scratch["fast"] == 3.0
    # Not so where the code tried is not another solution.
    assert candidates.try_candidate(runtime, code, namespace)[1].endswith("name 'pd' is not defined")
    # What the fixed code raises where no known fix applies is told.
    code = "import pandas as pd\nframe = pd.DataFrame({'wind speed': [1.0]})\nfast = frame['wind_speed'].max() + frame['zzz']"
    scratch, why, tried = candidates.try_candidate_fixed(runtime, code, namespace)
    assert scratch is None and why.endswith("KeyError: 'zzz'. Columns of frame: 'wind speed'"), why
    assert "frame['wind speed'].max()" in why
    assert "frame['wind speed'].max() + frame['zzz']" in tried
    # A dict whose keys are set before it was made, and pandas not imported.
    code = "answers['max'] = float(pd.Series([2.0, 5.0]).max())"
    scratch, why, tried = candidates.try_candidate_fixed(runtime, code, namespace)
    assert why is None and scratch["answers"] == {"max": 5.0}, why
    assert tried.startswith("import pandas as pd\nanswers = {}\n")


def test_each_candidate_tried_is_said_to_have_run_raised_or_not_been_tried():
    from mahtab.agent.scope import AgentScope

    scope = AgentScope(Runtime(), {"__builtins__": __builtins__})
    codes = ["x = 1", "x = 1 / 0", "import random\nx = random.random()"]
    tried = json.loads(scope.try_candidates(json.dumps({"codes": codes, "own": ""})))
    assert tried == {"outcomes": [
        "ran",
        {"raised": {"error": "line 1: `x = 1 / 0`\nZeroDivisionError: division by zero", "code": "x = 1 / 0"}},
        {"not_tried": "it draws at random"},
    ]}, tried


def test_solutions_are_grouped_by_every_value_largest_group_first():
    live = {"n": 3, "m": 1.0}
    solutions = [live, {"n": 4, "m": 1.0}, {"n": 4.0, "m": "1"}, None, {"n": 3}]
    assert candidates.groups(solutions, ["n", "m"]) == [[1, 2], [0]]
    assert candidates.groups(solutions, ["n"]) == [[0, 4], [1, 2]]


def test_code_that_draws_at_random_is_told_apart():
    runtime = Runtime()
    assert candidates.draws_at_random(runtime, "s = df.sample(5)")
    assert candidates.draws_at_random(runtime, "rng = np.random.default_rng(0)\nx = rng.integers(9)")
    assert not candidates.draws_at_random(runtime, "s = df.head(5)")
    assert not candidates.draws_at_random(runtime, "s = (")


def test_solutions_are_compared_on_the_names_all_of_them_computed():
    own = {"mean_value": 4.6, "answers": {"mean": 4.6}}
    steps_named_otherwise = {"m": 4.6, "answers": {"mean": 4.6}}
    computed_nothing_asked = {"x": 1}
    solutions = [own, steps_named_otherwise, None, computed_nothing_asked]
    names = candidates.shared_names(solutions, ["mean_value", "answers"])
    assert names == ["answers"]
    assert candidates.groups(solutions, names) == [[0, 1]]
    assert candidates.shared_names([None, own], ["answers"]) == []
    assert candidates.groups(solutions, []) == []


def test_a_solution_tried_after_the_run_starts_from_the_namespace_before_it():
    from mahtab.agent.scope import AgentScope
    from mahtab.agent.undo import UndoHistory
    from test_undo import run_block

    runtime = Runtime()
    namespace = {"df": pd.DataFrame({"a": [1, 2]}), "__builtins__": __builtins__}
    journal = UndoHistory().journal()
    # The run's own code changed df in place: a solution written for the
    # request, tried on the changed df, would double it twice.
    run_block(journal, "df['a'] = df['a'] * 2\nresult = df['a'].sum()", namespace)
    scope = AgentScope(runtime, namespace, journal=journal)
    codes = ["df['a'] = df['a'] * 2\nresult = df['a'].sum()", "result = df['a'].sum() * 2"]
    scope.try_candidates(json.dumps({"codes": codes, "own": "", "before_run": True}))
    compared = json.loads(scope.compare_candidates(json.dumps({"names": ["result"]})))
    assert compared["groups"] == [[0, 1, 2]], compared
    # Each described as the check describes the run's own values.
    assert compared["described"] == [[["result", "result: int64: np.int64(6)"]]] * 3, compared
    assert namespace["df"]["a"].tolist() == [2, 4] and namespace["result"] == 6
    # Without before_run, the same solutions read the run's changed df.
    scope.try_candidates(json.dumps({"codes": codes, "own": ""}))
    compared = json.loads(scope.compare_candidates(json.dumps({"names": ["result"]})))
    assert compared["groups"] == [[1, 2], [0]], compared

"""Agent code that would bind a name holding the user's data to a function,
class or module does not run, and says why: the data is kept. Code that
redefines code, or defines a name nothing holds, runs."""

import functools
import math

from mahtab.agent import execution

from agent_runtime import Runtime


def run(code, namespace):
    return execution.run_agent_code(Runtime(), code, namespace)


def test_a_def_over_the_users_data_does_not_run_and_says_which_name():
    # Seen with the 1.5B model (DS-1000): the task's data is a list
    # named `shift`, and the model's helper took that name.
    namespace = {"shift": [1, 2, 3]}
    code = "offset = 1\ndef shift(values, n):\n    return values[n:] + values[:n]\nresult = shift(shift, offset)\n"
    result = run(code, namespace)
    assert result["failed"] and not result["refused"]
    assert result["output"].startswith("NameInUse: `def shift(...)` would replace `shift`")
    assert "list len 3 = [1, 2, 3]" in result["output"]
    # Nothing of the block ran, and the data is as it was.
    assert namespace["shift"] == [1, 2, 3]
    assert "offset" not in namespace and "result" not in namespace
    assert result["changes"] == []


def test_a_class_or_an_import_over_data_does_not_run_either():
    for code, name in [("class report:\n    pass\n", "report"), ("from math import e\n", "e"),
                       ("import math as data\n", "data")]:
        namespace = {name: 2.5}
        result = run(code, namespace)
        assert result["failed"], code
        assert "would replace `%s`" % name in result["output"]
        assert namespace[name] == 2.5


def test_code_over_code_or_over_a_free_name_runs():
    def helper(x):
        return x

    namespace = {"helper": helper, "Table": dict, "np": math, "scorer": functools.partial(max, 0),
                 "values": [3, 4]}
    code = (
        "def helper(x):\n    return x * 2\n"
        "class Table:\n    pass\n"
        "import math as np\n"
        "def scorer(v):\n    return v\n"
        "def total(values):\n    def values_of(v):\n        return v\n    return sum(values_of(values))\n"
        "answer = total(values)\n"
    )
    result = run(code, namespace)
    assert not result["failed"], result["output"]
    assert namespace["answer"] == 7 and namespace["helper"](2) == 4

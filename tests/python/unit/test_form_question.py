"""bench/form_question.py: the form a right value has, whether the check
would send it back, the chance the model gave the form it chose, and the
names whose form the request states (no question asked)."""

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
import form_question  # noqa: E402


def test_the_form_a_value_has_and_what_the_check_sends_back():
    assert form_question.held(np.array([0.8, 1.4])) == ("several", 2)
    assert form_question.held(np.zeros((2, 3))) == ("table", 6)
    assert form_question.held(pd.DataFrame({"a": [1, 2]})) == ("table", 2)
    assert form_question.held(np.float64(2.5)) == ("one", 1)
    assert form_question.held(object()) is None
    # Asked for one number, a solution of two values goes back; one value
    # asked for as several goes back; a table asked for as several stays.
    assert form_question.sends_back("one", ("several", 2))
    assert not form_question.sends_back("one", ("several", 1))
    assert form_question.sends_back("table", ("one", 1))
    assert not form_question.sends_back("several", ("table", 6))
    assert not form_question.sends_back(None, ("one", 1))


def test_the_chance_of_the_form_chosen_among_the_forms():
    def token(text, choices=()):
        return {"token": text, "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in choices]}

    tokens = [token('{"'), token("form"), token('":'), token(' "'),
              token("one", [("one", 0.5), ("several", 0.3), ("a", 0.1), ("}", 0.1)]), token(" number")]
    mass, total = form_question.chance_of_choice(tokens)
    assert math.isclose(mass["one number"] / total, 0.5 / 0.9)
    assert math.isclose(mass["a table"], 0.1)
    assert form_question.chance_of_choice([token("{}")]) == ({}, 0.0)


def test_a_form_the_request_states_is_not_asked():
    assert form_question.stated_form("Put the rows in a DataFrame named `pricey`.", "pricey") == "table"
    assert form_question.stated_form("Make a pivot table of shop named `table`: a row", "table") == "table"
    assert form_question.stated_form("Store x as a list.", "x") == "several"
    assert form_question.stated_form("Solve m @ x = [3, 5] for x and store it in `x`.", "x") is None
    # A kind further off describes something else.
    assert form_question.stated_form("the total of the table in `n`", "n") is None

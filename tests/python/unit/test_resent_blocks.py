"""A block the model sends again after a failure runs on the data as it
was before the run: a change in place the first try made is not made
twice. Only what the block makes again, statement for statement, goes
back; a block that builds on the last one keeps its work."""

import pandas as pd

from mahtab.agent import execution
from mahtab.agent.undo import UndoHistory

from agent_runtime import Runtime


def sales():
    return pd.DataFrame({"Date": ["2024-01-01", "2024-01-02"], "price": [2.0, 3.0]})


def run(journal, code, namespace):
    return execution.run_agent_code(Runtime(), code, namespace, journal=journal)


def test_a_block_sent_again_after_it_failed_runs_on_the_data_as_it_was():
    namespace = {"pd": pd, "df": sales()}
    original = namespace["df"]
    journal = UndoHistory().journal()
    first = "df.set_index('Date', inplace=True)\ndf['price'] = df['price'] * 100\ntotal = df['missing'].sum()\n"
    assert run(journal, first, namespace)["failed"]
    assert namespace["df"].index.name == "Date"
    again = "df.set_index('Date', inplace=True)\ndf['price'] = df['price'] * 100\ntotal = df['price'].sum()\n"
    result = run(journal, again, namespace)
    assert not result["failed"], result["output"]
    assert namespace["total"] == 500.0
    assert list(namespace["df"]["price"]) == [200.0, 300.0]
    # What the second block changed is told from the data as it was.
    assert any(line.startswith("df: ") and "Date" not in line.split("->")[-1] for line in result["changes"])
    journal.finish(namespace)
    # Undo still puts the user's table back as it was.
    journal.history.undo(namespace)
    assert list(namespace["df"].columns) == ["Date", "price"]
    assert list(namespace["df"]["price"]) == [2.0, 3.0]
    # The user's object itself, not a copy.
    assert namespace["df"] is original and original.index.name is None


def test_a_change_in_place_sent_again_keeps_the_users_object():
    # Seen on a development task: the request asks for `customers` itself
    # to change, and the block that changed it in place is sent again.
    customers = pd.DataFrame({"city": ["  paris", "LONDON"]})
    namespace = {"pd": pd, "customers": customers}
    journal = UndoHistory().journal()
    block = "customers['city'] = customers['city'].str.strip().str.title()\n"
    run(journal, block, namespace)
    run(journal, block, namespace)
    assert namespace["customers"] is customers
    assert list(customers["city"]) == ["Paris", "London"]


def test_a_block_that_repeats_only_the_last_of_several_changes_keeps_the_earlier_ones():
    # Seen on a development task: the cleaning was right, the review sent it
    # back, and the model went on with `fillna` in place, twice.
    customers = pd.DataFrame({"city": ["  paris", "LONDON"]})
    namespace = {"pd": pd, "customers": customers}
    journal = UndoHistory().journal()
    clean = "customers['city'] = customers['city'].str.strip() + '!'\n"
    fill = "customers.fillna(0, inplace=True)\n"
    run(journal, clean, namespace)
    run(journal, fill, namespace)
    run(journal, fill, namespace)
    assert namespace["customers"] is customers
    assert list(customers["city"]) == ["paris!", "LONDON!"]
    # A block that makes every change again starts from the data as it was.
    run(journal, clean + fill, namespace)
    assert list(customers["city"]) == ["paris!", "LONDON!"]


def test_a_value_rebound_by_the_first_try_gets_its_own_object_back():
    namespace = {"pd": pd, "df": sales()}
    original = namespace["df"]
    journal = UndoHistory().journal()
    block = "df = df[df['price'] > 2]\ndf['price'] = df['price'] * 2\n"
    run(journal, block, namespace)
    run(journal, block, namespace)
    assert list(namespace["df"]["price"]) == [6.0]
    assert original is not namespace["df"] and list(original["price"]) == [2.0, 3.0]


def test_a_change_sent_again_after_a_block_that_only_rebinds_the_name_is_not_made_twice():
    # Recorded from the 1.5B model (DS-1000): a scaling in place, then
    # `df = df` to "store the result", then the scaling again.
    namespace = {"pd": pd, "df": sales()}
    journal = UndoHistory().journal()
    scale = "df.loc[df['price'] > 2, 'price'] *= 10\n"
    run(journal, scale, namespace)
    run(journal, "df = df\n", namespace)
    run(journal, scale, namespace)
    assert list(namespace["df"]["price"]) == [2.0, 30.0]


def test_a_block_that_builds_on_the_last_one_keeps_its_work():
    namespace = {"pd": pd, "df": sales()}
    journal = UndoHistory().journal()
    run(journal, "df['cost'] = df['price'] * 2\ndf['rounded'] = df['cost'].round()\nboom = 1 / 0\n", namespace)
    # Only part of what the last block did to df: nothing goes back.
    result = run(journal, "df['rounded'] = df['cost'].round()\nn = len(df)\n", namespace)
    assert not result["failed"], result["output"]
    assert list(namespace["df"].columns) == ["Date", "price", "cost", "rounded"]
    # Another change than the last block's: nothing goes back either.
    run(journal, "df['price'] = df['price'] + 1\n", namespace)
    run(journal, "df['price'] = df['price'] + 10\n", namespace)
    assert list(namespace["df"]["price"]) == [13.0, 14.0]


def test_without_a_journal_or_a_run_before_nothing_goes_back():
    namespace = {"pd": pd, "df": sales()}
    block = "df['price'] = df['price'] * 10\n"
    execution.run_agent_code(Runtime(), block, namespace)
    execution.run_agent_code(Runtime(), block, namespace)
    assert list(namespace["df"]["price"]) == [200.0, 300.0]
    # A new run (the next %%ask) starts from the namespace as it is.
    history = UndoHistory()
    run(history.journal(), block, namespace)
    run(history.journal(), block, namespace)
    assert list(namespace["df"]["price"]) == [20000.0, 30000.0]

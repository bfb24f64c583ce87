"""How values are described to the agent: the words that tell its check a
table, series or array holds nothing but missing values."""

import numpy as np
import pandas as pd

from mahtab.namespace import EVERY_VALUE_MISSING, describe_briefly


def test_a_table_of_placeholders_or_missing_values_says_so() -> None:
    # As a pivot whose aggregation returned (None, None) on a failing path.
    placeholders = pd.DataFrame({"D": [(None, None)] * 3, "E": [(None, None)] * 3})
    for value in [
        placeholders,
        pd.DataFrame({"a": [np.nan, np.nan]}),
        pd.Series([None, None]),
        pd.Series([pd.NA, pd.NA], dtype="Int64"),
        pd.Series(pd.NaT, index=[0, 1]),
        np.full(3, np.nan),
    ]:
        assert describe_briefly(value).endswith(", " + EVERY_VALUE_MISSING), value


def test_values_with_anything_in_them_and_empty_tables_do_not() -> None:
    for value in [
        pd.DataFrame({"a": [1.0, np.nan]}),
        pd.DataFrame({"a": ["x", None]}),
        pd.DataFrame(),
        pd.Series([], dtype=float),
        np.zeros(3),
        [None, None],
        None,
    ]:
        assert EVERY_VALUE_MISSING not in describe_briefly(value), value

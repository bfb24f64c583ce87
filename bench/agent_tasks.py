"""The notebook tasks bench/agent_eval.py puts to each agent graph.

A task is set up in a fresh kernel (its `setup` cell, and `files` written to
the kernel's empty working directory), asked in plain words, and then judged
by `check`, a Python expression evaluated in the kernel that inspects the
namespace or the files, never the model's text; `images` is how many figures
the run must have shown. `solution` is code that solves the task: the replay
provider answers with it, which checks the harness and every checker.

Checkers can use two things the harness sets up without the model seeing
them (in cells kept out of the history): `_eval_figures`, what each figure
drawn or saved showed (see FIGURE_RECORDER), and `_eval_ids`, the identity of
each variable right after the setup, for requests that ask to change an
object itself rather than make a new one.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Task:
    name: str
    kind: str
    setup: str
    prompt: str
    solution: str
    check: str
    files: dict = field(default_factory=dict)
    images: int = 0
    # Run before the setup and kept out of the history: a checker's own
    # helpers (`_eval_*` names), which the agent must not see.
    hidden_setup: str = ""
    # Code that looks like an answer but is wrong: the checker must refuse it.
    wrong_solution: str = ""


SALES = (
    "import pandas as pd\n"
    "sales = pd.DataFrame({'fruit': ['apple', 'pear', 'apple', 'fig'], "
    "'qty': [3, 1, 2, 5], 'price': [0.5, 1.2, 0.5, 2.0]})"
)

# Runs in the kernel before the setup: records what each figure shows when it
# is rendered (shown inline or saved), since the inline backend closes it.
FIGURE_RECORDER = """
def _eval_record_figures():
    from matplotlib.backend_bases import FigureCanvasBase
    from matplotlib.patches import Rectangle

    figures = []
    original = FigureCanvasBase.print_figure

    def describe(figure):
        axes = figure.axes
        return {
            "titles": [ax.get_title() for ax in axes],
            "lines": [(list(map(float, line.get_xdata())), list(map(float, line.get_ydata())))
                      for ax in axes for line in ax.get_lines()],
            "points": [collection.get_offsets().tolist() for ax in axes for collection in ax.collections],
            "bars": [float(patch.get_height()) for ax in axes for patch in ax.patches
                     if isinstance(patch, Rectangle)],
            "labels": [label.get_text() for ax in axes for label in ax.get_xticklabels()],
        }

    def print_figure(self, *args, **kwargs):
        figures.append(describe(self.figure))
        return original(self, *args, **kwargs)

    FigureCanvasBase.print_figure = print_figure
    return figures

_eval_figures = _eval_record_figures()
"""

# Runs in the kernel after the setup: each variable's identity.
IDENTITIES = "_eval_ids = {k: id(v) for k, v in list(globals().items()) if not k.startswith('_')}"

LOG = "\n".join("ERROR disk full" if i == 143 else f"INFO request {i} served" for i in range(1, 201)) + "\n"

TASKS = [
    # -- pandas ------------------------------------------------------------
    Task(
        "pandas_revenue", "pandas", SALES,
        "Add a column `revenue` to sales that is qty times price.",
        "sales['revenue'] = sales['qty'] * sales['price']",
        "list(sales['revenue']) == [1.5, 1.2, 1.0, 10.0]",
    ),
    Task(
        "pandas_groupby", "pandas", SALES,
        "Store the total qty per fruit as a dict in `per_fruit` (fruit name to total).",
        "per_fruit = sales.groupby('fruit')['qty'].sum().to_dict()",
        "per_fruit == {'apple': 5, 'pear': 1, 'fig': 5}",
    ),
    Task(
        "pandas_filter", "pandas", SALES,
        "Put the rows of sales with a price above 1 in a DataFrame named `pricey`.",
        "pricey = sales[sales['price'] > 1]",
        "sorted(pricey['fruit']) == ['fig', 'pear']",
    ),
    Task(
        "pandas_fill_missing", "pandas",
        "import pandas as pd\npeople = pd.DataFrame({'name': ['ann', 'bob', 'cy'], 'age': [31, None, 45]})",
        "Fill the missing ages in people with the mean age (change people itself).",
        "people['age'] = people['age'].fillna(people['age'].mean())",
        "id(people) == _eval_ids['people'] and people['age'].isna().sum() == 0 and people['age'][1] == 38.0",
    ),
    Task(
        "pandas_top_row", "pandas", SALES,
        "Which fruit has the row with the highest qty times price in sales? Store it in `top_fruit`.",
        "top_fruit = sales.assign(r=sales['qty'] * sales['price']).sort_values('r').iloc[-1]['fruit']",
        "top_fruit == 'fig'",
    ),
    Task(
        "pandas_rename", "pandas", SALES,
        "Rename the column qty of sales to quantity (sales itself should change).",
        "sales.rename(columns={'qty': 'quantity'}, inplace=True)",
        "id(sales) == _eval_ids['sales'] and list(sales.columns) == ['fruit', 'quantity', 'price']"
        " and list(sales['quantity']) == [3, 1, 2, 5]",
    ),
    Task(
        "pandas_merge", "pandas",
        SALES + "\nstock = pd.DataFrame({'fruit': ['apple', 'pear', 'fig'], 'shelf': ['A', 'B', 'C']})",
        "Merge sales with stock on the fruit column into a DataFrame named `merged`.",
        "merged = sales.merge(stock, on='fruit')",
        "len(merged) == 4 and 'shelf' in merged.columns",
    ),
    Task(
        "pandas_clean_text", "pandas",
        "import pandas as pd\ncustomers = pd.DataFrame({'city': ['  paris', 'Paris ', 'LONDON', 'london']})",
        "Clean the city column of customers: strip the spaces and write each name in title case"
        " (customers itself should change).",
        "customers['city'] = customers['city'].str.strip().str.title()",
        "id(customers) == _eval_ids['customers'] and list(customers['city']) == ['Paris', 'Paris', 'London', 'London']",
    ),
    Task(
        "pandas_monthly", "pandas",
        "import pandas as pd\norders = pd.DataFrame({'date': pd.to_datetime(['2024-01-05', '2024-01-20', "
        "'2024-02-03', '2024-03-15', '2024-03-30']), 'amount': [10, 20, 5, 7, 8]})",
        "Store the total amount of orders per month, in month order, in `monthly`.",
        "monthly = orders.groupby(orders['date'].dt.to_period('M'))['amount'].sum()",
        "list(monthly) == [30, 5, 15]",
    ),
    Task(
        "pandas_pivot", "pandas",
        "import pandas as pd\nshop = pd.DataFrame({'region': ['north', 'south', 'north', 'south', 'north'], "
        "'fruit': ['apple', 'apple', 'pear', 'pear', 'apple'], 'qty': [3, 4, 1, 2, 2]})",
        "Make a pivot table of shop named `table`: a row per region, a column per fruit, the summed qty as values.",
        "table = shop.pivot_table(index='region', columns='fruit', values='qty', aggfunc='sum')",
        "table.shape == (2, 2) and table.loc['north', 'apple'] == 5 and table.loc['south', 'pear'] == 2",
    ),
    Task(
        "pandas_distinct", "pandas", SALES,
        "How many distinct fruits are in sales? Store the number in `n_fruits`.",
        "n_fruits = sales['fruit'].nunique()",
        "n_fruits == 3",
    ),
    # -- numpy -------------------------------------------------------------
    Task(
        "numpy_nanmean", "numpy",
        "import numpy as np\nreadings = np.array([3.0, 4.5, np.nan, 5.5, 2.0])",
        "Store the mean of readings, ignoring the missing value, in `mean_reading`.",
        "mean_reading = float(np.nanmean(readings))",
        "abs(mean_reading - 3.75) < 1e-9",
    ),
    Task(
        "numpy_solve", "numpy",
        "import numpy as np\nm = np.array([[2.0, 1.0], [1.0, 3.0]])",
        "Solve m @ x = [3, 5] for x and store the solution in `x`.",
        "x = np.linalg.solve(m, [3, 5])",
        "__import__('numpy').allclose(m @ x, [3, 5])",
    ),
    Task(
        "numpy_unit", "numpy",
        "import numpy as np\nv = np.array([3.0, 4.0])",
        "Store v scaled to unit length in `unit`.",
        "unit = v / np.linalg.norm(v)",
        "__import__('numpy').allclose(unit, [0.6, 0.8])",
    ),
    Task(
        "numpy_argmax", "numpy",
        "import numpy as np\nscores = np.array([7, 9, 4, 9, 1])",
        "Store the index of the first highest score in scores in `best`.",
        "best = int(np.argmax(scores))",
        "best == 1",
    ),
    Task(
        "numpy_reshape", "numpy",
        "import numpy as np\nflat = np.arange(12)",
        "Reshape flat into 3 rows and 4 columns and call the result `grid`.",
        "grid = flat.reshape(3, 4)",
        "grid.shape == (3, 4) and grid[2, 3] == 11",
    ),
    Task(
        "numpy_spread", "numpy",
        "import numpy as np\nsamples = np.random.default_rng(0).normal(10, 2, 1000)",
        "Store the standard deviation of samples in `spread`.",
        "spread = float(samples.std())",
        "abs(spread - float(samples.std())) < 0.01",
    ),
    # -- matplotlib --------------------------------------------------------
    Task(
        "plot_sine", "matplotlib",
        "import numpy as np\nxs = np.linspace(0, 6.3, 50)",
        "Plot sin(xs) against xs.",
        "import matplotlib.pyplot as plt\nplt.plot(xs, np.sin(xs))\nplt.show()",
        "any(x == list(xs) and __import__('numpy').allclose(y, __import__('numpy').sin(xs))"
        " for f in _eval_figures for x, y in f['lines'])",
        images=1,
    ),
    Task(
        "plot_bar_file", "matplotlib", SALES,
        "Save a bar chart of the total qty per fruit in sales to the file qty.png.",
        "import matplotlib.pyplot as plt\nsales.groupby('fruit')['qty'].sum().plot.bar()\nplt.savefig('qty.png')",
        "__import__('os').path.getsize('qty.png') > 0 and any(sorted(f['bars']) == [1, 5, 5]"
        " and {'apple', 'fig', 'pear'} <= set(f['labels']) for f in _eval_figures)",
    ),
    Task(
        "plot_scatter", "matplotlib",
        "heights = [150, 160, 170, 180, 190]\nweights = [50, 58, 66, 77, 85]",
        "Draw a scatter plot of weights against heights.",
        "import matplotlib.pyplot as plt\nplt.scatter(heights, weights)\nplt.show()",
        "any(p == [[h, w] for h, w in zip(heights, weights)] for f in _eval_figures for p in f['points'])",
        images=1,
    ),
    Task(
        "plot_histogram", "matplotlib",
        "ages = [23, 35, 31, 45, 52, 38, 29, 41, 33, 60]",
        "Show a histogram of ages with 5 bins.",
        "import matplotlib.pyplot as plt\nplt.hist(ages, bins=5)\nplt.show()",
        "any(len(f['bars']) == 5 and sum(f['bars']) == len(ages) for f in _eval_figures)",
        images=1,
    ),
    Task(
        "plot_title", "matplotlib",
        "levels = [3, 5, 4, 6, 8]",
        "Plot levels as a line with the title 'Levels', and keep the figure in a variable named `fig`.",
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot(levels)\nax.set_title('Levels')",
        "fig.axes[0].get_title() == 'Levels' and list(fig.axes[0].get_lines()[0].get_ydata()) == levels",
    ),
    # -- files -------------------------------------------------------------
    Task(
        "files_count_lines", "files", "",
        "How many lines does the file notes.txt have? Store the count in `n_lines`.",
        "n_lines = len(open('notes.txt').read().splitlines())",
        "n_lines == 3",
        files={"notes.txt": "alpha\nbeta\ngamma\n"},
    ),
    Task(
        "files_csv_mean", "files", "",
        "Load scores.csv into a DataFrame named `scores` and store the mean score in `mean_score`.",
        "import pandas as pd\nscores = pd.read_csv('scores.csv')\nmean_score = scores['score'].mean()",
        "abs(mean_score - 82.3333) < 0.01 and len(scores) == 3",
        files={"scores.csv": "name,score\nann,90\nbob,72\ncy,85\n"},
    ),
    Task(
        "files_write_words", "files", "words = ['red', 'green', 'blue']",
        "Write the items of words to the file words.txt, one per line.",
        "with open('words.txt', 'w') as f:\n    f.write('\\n'.join(words) + '\\n')",
        "open('words.txt').read().split() == ['red', 'green', 'blue']",
    ),
    Task(
        "files_json", "files", "",
        "Read config.json and store its retries value in `retries`.",
        "import json\nretries = json.load(open('config.json'))['retries']",
        "retries == 3",
        files={"config.json": '{"name": "demo", "retries": 3}'},
    ),
    Task(
        "files_find_error", "files", "",
        "Find the line number (counting from 1) of the ERROR line in app.log and store it in `error_line`.",
        "error_line = next(i for i, line in enumerate(open('app.log'), 1) if 'ERROR' in line)",
        "error_line == 143",
        files={"app.log": LOG},
    ),
    # -- errors to fix -----------------------------------------------------
    Task(
        "fix_mean", "errors",
        "def mean_of(values):\n    return sum(values) / len(values) + 1",
        "The function mean_of is wrong: mean_of([1, 2, 3]) should be 2. Fix it.",
        "def mean_of(values):\n    return sum(values) / len(values)",
        "mean_of([1, 2, 3]) == 2 and mean_of([4]) == 4",
    ),
    Task(
        "fix_off_by_one", "errors",
        "def first_n(n):\n    return list(range(1, n))",
        "first_n(3) should return [1, 2, 3]. Fix first_n.",
        "def first_n(n):\n    return list(range(1, n + 1))",
        "first_n(3) == [1, 2, 3] and first_n(1) == [1]",
    ),
    Task(
        "fix_missing_key", "errors",
        "inventory = {'apples': 3, 'pears': 0}\ndef count(name):\n    return inventory[name]",
        "count('plums') raises a KeyError. Make count return 0 for names not in inventory.",
        "def count(name):\n    return inventory.get(name, 0)",
        "count('plums') == 0 and count('apples') == 3",
    ),
    Task(
        "fix_type_error", "errors",
        "def label(n):\n    return 'item ' + n",
        "label(3) fails with a TypeError. Fix label so that label(3) returns 'item 3'.",
        "def label(n):\n    return 'item ' + str(n)",
        "label(3) == 'item 3'",
    ),
    # -- questions about data in the namespace ------------------------------
    Task(
        "data_warmest", "data",
        "temps = {'mon': 21.5, 'tue': 25.1, 'wed': 19.8}",
        "Which day in temps was the warmest? Store the day in `warmest`.",
        "warmest = max(temps, key=temps.get)",
        "warmest == 'tue'",
    ),
    Task(
        "data_open_orders", "data",
        "orders = [{'id': 1, 'status': 'open'}, {'id': 2, 'status': 'closed'}, {'id': 3, 'status': 'open'}]",
        "How many of the orders are open? Store the number in `open_orders`.",
        "open_orders = sum(1 for o in orders if o['status'] == 'open')",
        "open_orders == 2",
    ),
    Task(
        "data_apple_price", "data", SALES,
        "What is the average price of apples in sales? Store it in `apple_price`.",
        "apple_price = sales[sales['fruit'] == 'apple']['price'].mean()",
        "apple_price == 0.5",
    ),
    Task(
        "data_word_count", "data",
        "review = 'The food was great but the service was slow and the music was loud.'",
        "How many times does the word 'was' appear in review? Store the count in `was_count`.",
        "was_count = review.split().count('was')",
        "was_count == 3",
    ),
    Task(
        "data_clean_emails", "data",
        "emails = [' Ann@Example.com', 'bob@example.COM ']",
        "Clean up emails: strip the spaces and lower-case each address (change the list itself).",
        "emails[:] = [e.strip().lower() for e in emails]",
        "id(emails) == _eval_ids['emails'] and emails == ['ann@example.com', 'bob@example.com']",
    ),
]

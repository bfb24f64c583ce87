"""What an agent run changed and undoing it, approvals, the cost and the
figures, through jupyter_client against the real kernel, with a scripted
model over real HTTP: the "changed" panel and %ask_undo (from a second
client too), an approval question answered on the stdin channel, the cost
from the settings file's prices, and a figure described in words and sent
as an image to a model that sees images."""

from __future__ import annotations

from pathlib import Path

import pytest
from jupyter_client import BlockingKernelClient

from conftest import KERNEL_NAME, Kernel, kernel_with_model
from fake_llm import DONE

pytestmark = pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="%%ask is mahtab's")


def panels(execution, kind: str) -> list[str]:
    return [
        c["data"]["text/plain"]
        for c in execution.of_type("display_data")
        if c["metadata"].get("mahtab", {}).get("kind") == kind
    ]


def second_client(kernel: Kernel) -> Kernel:
    """Another client of the same kernel, as a console joining it."""
    client = BlockingKernelClient()
    client.load_connection_info(kernel.km.get_connection_info())
    client.start_channels()
    client.wait_for_ready(timeout=30)
    return Kernel(kernel.km, client)


def test_the_changed_panel_and_undo_from_another_client(tmp_path: Path) -> None:
    code = "```python\ntable['total'] = table['qty'] * 2\nrows = len(table)\n```"
    with kernel_with_model(tmp_path, [code, DONE]) as (kernel, _):
        kernel.execute("import pandas as pd\ntable = pd.DataFrame({'qty': [1, 2]})").assert_ok()
        run = kernel.execute("%%ask\nAdd a total column and count the rows into rows.").assert_ok()
        (changed,) = panels(run, "changes")
        assert "added    rows: int = 2" in changed, changed
        assert "changed  table: DataFrame 2x1, columns qty -> DataFrame 2x2, columns qty, total" in changed, changed
        other = second_client(kernel)
        try:
            undo = other.execute("%ask_undo").assert_ok()
        finally:
            other.kc.stop_channels()
        assert undo.stdout == "Undid the last run: rows, table.\n", undo.describe()
        after = kernel.execute("(list(table.columns), 'rows' in globals())").assert_ok()
        assert after.result()["text/plain"] == "(['qty'], False)"


def test_an_approval_is_asked_on_stdin_and_a_no_keeps_the_code_from_running(tmp_path: Path) -> None:
    code = "```python\nflag = 'ran'\n```"
    with kernel_with_model(tmp_path, [code, "Not run, then.", DONE]) as (kernel, llm):
        msg_id = kernel.kc.execute("%%ask --approve always --max-turns 2\nset the flag", allow_stdin=True)
        question = kernel.wait_for("stdin", lambda m: m["msg_type"] == "input_request", "the approval question")
        assert question["content"]["prompt"] == "Run this code? [y/N] "
        assert question["parent_header"]["msg_id"] == msg_id
        kernel.kc.input("n")
        kernel.finish("%%ask", msg_id).assert_ok()
        told = llm.requests[1]["messages"][-1]["content"]
        assert "Not run: the user chose not to run this code." in told, told
        assert kernel.execute("'flag' in globals()").result()["text/plain"] == "False"


def test_the_summary_shows_the_cost_from_the_settings_prices(tmp_path: Path) -> None:
    settings = tmp_path / "mahtab.toml"
    settings.write_text('[prices]\n"fake-model" = { input = 1000, output = 2000 }\n')
    with kernel_with_model(tmp_path, ["It is 42."], MAHTAB_CONFIG=str(settings)) as (kernel, _):
        run = kernel.execute("%%ask\nWhat is six times seven?").assert_ok()
        (summary,) = panels(run, "summary")
        # The scripted server reports 10 prompt tokens and one a piece of the answer.
        assert "10 in / 2 out tokens · $0.0140" in summary, summary


def test_a_figure_is_described_and_sent_to_a_model_that_sees_images(tmp_path: Path) -> None:
    plot = (
        "```python\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [2, 4, 8])\n"
        "plt.title('Growth')\nplt.show()\n```"
    )
    with kernel_with_model(tmp_path, [plot, DONE], MAHTAB_VISION="1") as (kernel, llm):
        kernel.execute("%%ask\nshow me the growth").assert_ok()
        review = llm.requests[1]["messages"][-1]["content"]
        assert isinstance(review, list), review
        text = review[0]["text"]
        assert "figure: figure 640x480 px, 1 axes; axes 1: title 'Growth'" in text, text
        assert "1 line x 1..3 y 2..8" in text, text
        assert review[1]["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")

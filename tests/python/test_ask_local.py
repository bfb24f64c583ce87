"""%%ask end to end through the real kernel with the real local model: with
no provider configured the kernel serves the embedded coder model
(Qwen2.5-Coder-1.5B through llama.cpp, both installed by the project's
scripts) and talks to it. A small model is often wrong, so these tests check
structure (streamed text, code and output panels, the shared namespace, the
"changed" panel and undo, interrupts, the model's server shared by kernels),
not its answers."""

from __future__ import annotations

import ast
import os
import time

import psutil
import pytest
from jupyter_client.manager import start_new_kernel

from conftest import KERNEL_NAME, Kernel, local_model_servers

pytestmark = pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="%%ask is mahtab's")

PROVIDER_VARIABLES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MAHTAB_PROVIDER", "MAHTAB_MODEL")

# Loading the model and a short turn of the 1.5B model on 2 cores take seconds,
# not minutes (when nothing else keeps the cores busy).
ASK_TIMEOUT = 240

# What the kernel itself streams into an %%ask cell (src/agent/render/):
# the start notice, the reflection's verdict, the plan. Not the model's text.
KERNEL_LINES = ("(starting the local model", "✓ ", "↻ ", "plan: ")


@pytest.fixture
def settings_file(tmp_path):
    """The kernel's settings file, read afresh for every cell; empty at first."""
    path = tmp_path / "mahtab.toml"
    path.write_text("")
    return path


@pytest.fixture
def local_env(tmp_path, settings_file) -> dict[str, str]:
    """A kernel's environment: no provider, the settings file, a Jupyter
    runtime directory of the test's own (where the shared server is found),
    and no replay of recorded runs."""
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES}
    env.update(
        IPYTHONDIR=str(tmp_path / "ipython"),
        JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        MAHTAB_CONFIG=str(settings_file),
        # These tests are about the model's answers: a cell always asks
        # (test_replay.py covers records).
        MAHTAB_REPLAY="0",
    )
    return env


@pytest.fixture
def local_kernel(tmp_path, local_env):
    km, kc = start_new_kernel(kernel_name=KERNEL_NAME, startup_timeout=60, cwd=str(tmp_path), env=local_env)
    try:
        yield Kernel(km, kc)
    finally:
        kc.stop_channels()
        if km.is_alive():
            km.shutdown_kernel()


def panels(execution, kind):
    """Contents of the execution's %%ask panels of one kind."""
    return [
        c for c in execution.of_type("display_data") if c["metadata"].get("mahtab", {}).get("kind") == kind
    ]


def is_model_text(text: str) -> bool:
    """Whether a streamed piece is the model's own words, not a line of the kernel's."""
    if not text.strip() or text.startswith(KERNEL_LINES):
        return False
    # A retry notice: "(<error>; trying again in 2 s)".
    return not (text.startswith("(") and "; trying again in " in text)


def code_that_ran(execution) -> list[str]:
    """The code of the execution's code panels whose run did not fail, in order.
    A code panel reads "[code, turn N]\\n<code>"; its run's panel (kind "output"
    or "error") has the same turn and block."""
    ran = {
        (p["metadata"]["mahtab"]["turn"], p["metadata"]["mahtab"]["block"]) for p in panels(execution, "output")
    }
    code = []
    for panel in panels(execution, "code"):
        key = (panel["metadata"]["mahtab"]["turn"], panel["metadata"]["mahtab"]["block"])
        header, _, source = panel["data"]["text/plain"].partition("\n")
        assert header == f"[code, turn {key[0]}]", panel
        if key in ran:
            code.append(source)
    return code


def assigned(target: ast.expr) -> set[str]:
    """The names an assignment to `target` binds (`a`, `a, *b`), not `a.x` or `a[0]`."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return {name for element in target.elts for name in assigned(element)}
    if isinstance(target, ast.Starred):
        return assigned(target.value)
    return set()


def top_level_names(sources: list[str]) -> set[str]:
    """Names that running `sources` one after another leaves bound at top level:
    assignments, functions, classes and imports (minus `del`)."""
    names: set[str] = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue  # IPython syntax (magics, `!`): not worth guessing at
        for node in tree.body:
            if isinstance(node, ast.Assign):
                names |= {name for target in node.targets for name in assigned(target)}
            elif isinstance(node, ast.AugAssign) or (isinstance(node, ast.AnnAssign) and node.value is not None):
                # (`x: 23`, an annotation alone, binds nothing.)
                names |= assigned(node.target)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                # `import a.b` binds a; `from m import *` binds nothing we can name.
                names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
            elif isinstance(node, ast.Delete):
                names -= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def check_ask_cell(kernel: Kernel, ask) -> list[str]:
    """What the kernel owes any answer of the model: an ok reply, every code
    panel with its run's panel, both formats, the summary, and what the code
    that ran defined at top level visible to the user's next cell. Returns
    those names."""
    assert ask.reply["status"] == "ok", ask.describe()
    code, runs = panels(ask, "code"), panels(ask, "output") + panels(ask, "error")
    for panel in code + runs:
        assert {"text/plain", "text/markdown"} <= set(panel["data"]), ask.describe()
    blocks = sorted((p["metadata"]["mahtab"]["turn"], p["metadata"]["mahtab"]["block"]) for p in code)
    ran = sorted((p["metadata"]["mahtab"]["turn"], p["metadata"]["mahtab"]["block"]) for p in runs)
    # Blocks run in order up to the first failure; the ones after it are not shown.
    assert blocks == ran, f"each code block shown runs, once\n{ask.describe()}"
    summary = panels(ask, "summary")
    assert len(summary) == 1 and "local model Qwen2.5-Coder" in summary[0]["data"]["text/plain"], ask.describe()

    defined = sorted(top_level_names(code_that_ran(ask)))
    if defined:
        missing = kernel.execute(f"[n for n in {defined!r} if n not in globals()]").assert_ok()
        assert missing.result()["text/plain"] == "[]", f"defined by the agent: {defined}\n{ask.describe()}"
    return defined


# The local model answers at temperature 0 with a fixed seed, the same answer
# every time; sampled (temperature 0.8), told what to write, a small model wrote
# a sentence in about 9 answers of 10, and code that ran and defined a name in
# about 7 (measured). So the cell is asked again, afresh and sampled with a new
# seed each time, until both were seen, within the time one cell had before;
# every answer is checked (check_ask_cell).
ASK_ATTEMPTS = 8


def sample_with_seed(settings_file, seed: int) -> None:
    """The next cells' model samples at temperature 0.8 with `seed`."""
    settings_file.write_text(f"temperature = 0.8\nseed = {seed}\n")


def test_ask_with_the_local_model_streams_runs_code_and_shares_the_namespace(local_kernel, settings_file) -> None:
    deadline = time.monotonic() + ASK_TIMEOUT
    asks, model_text, defined = [], False, []
    while len(asks) < ASK_ATTEMPTS and time.monotonic() < deadline and not (model_text and defined):
        sample_with_seed(settings_file, len(asks))
        ask = local_kernel.execute(
            "%%ask --max-turns 1 --new\n"
            "Reply with exactly this text:\n\n"
            "Here is the code.\n```python\nanswer = 6 * 7\nprint(answer)\n```",
            timeout=deadline - time.monotonic(),
        )
        asks.append(ask)
        # The start notice and the verdict stream even when the answer is only
        # code: they are not the model's text.
        model_text = model_text or any(is_model_text(c["text"]) for c in ask.of_type("stream"))
        names = check_ask_cell(local_kernel, ask)
        defined = defined or names

    tried = f"{len(asks)} attempts; the last:\n{asks[-1].describe()}"
    assert model_text, f"the model's own text streams to the cell ({tried})"
    assert defined, f"the agent's code that ran defined something at top level ({tried})"


# The agent's toolbox (src/python/mahtab/tools.py), as the model's code calls it.
TOOLS = {"peek", "grep", "partition", "read", "skill", "skills", "rlm"}


def tool_calls(source: str) -> set[str]:
    """The toolbox functions `source` calls by name."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in TOOLS
    }


def test_the_local_models_code_calls_a_tool(local_kernel, settings_file) -> None:
    # A log with one error in it, in the user's namespace; the model is told
    # to grep it. Whether it does varies (see ASK_ATTEMPTS), so the cell is
    # asked afresh until a block that calls a tool ran, and each answer is
    # checked like any other.
    local_kernel.execute(
        "log = '\\n'.join(f'INFO request {i} served' for i in range(300)).replace("
        "'INFO request 142 served', 'ERROR disk full')"
    ).assert_ok()
    deadline = time.monotonic() + ASK_TIMEOUT
    asks, called = [], {}
    while len(asks) < ASK_ATTEMPTS and time.monotonic() < deadline and not called:
        # An earlier answer may have bound a tool's name in the namespace
        # (`grep = lambda ...`), which hides the tool from later code.
        local_kernel.execute(f"for _name in {sorted(TOOLS)!r}: globals().pop(_name, None)").assert_ok()
        sample_with_seed(settings_file, len(asks))
        ask = local_kernel.execute(
            "%%ask --max-turns 1 --new\n"
            "Find the error in the variable log. Reply with exactly this text:\n\n"
            "```python\nprint(grep(log, 'ERROR'))\n```",
            timeout=deadline - time.monotonic(),
        )
        asks.append(ask)
        check_ask_cell(local_kernel, ask)
        called = {source: tool_calls(source) for source in code_that_ran(ask) if tool_calls(source)}

    tried = f"{len(asks)} attempts; the last:\n{asks[-1].describe()}"
    assert called, f"a code block of the model's that calls a tool ran ({tried})"
    # What a grep of the log prints, when that is what the model ran.
    outputs = [p["data"]["text/plain"] for p in panels(asks[-1], "output")]
    if any(source.strip() == "print(grep(log, 'ERROR'))" for source in called):
        assert any("143: ERROR disk full" in text for text in outputs), tried


# Each graph %%ask offers, as the magic line runs it here: two turns each
# (for the triage, one review of whatever agent it hands the work to).
GRAPHS = (
    "--graph default --max-turns 2",
    "--graph analyst --max-turns 2",
    "--graph planner --informer --max-turns 2",
    "--graph triage --max-turns 1",
)


def test_every_graph_runs_end_to_end_with_the_local_model(local_kernel) -> None:
    # Plumbing, not quality: whatever the model answers, each graph's run
    # ends with its summary, its panels in pairs, and the kernel usable.
    for graph in GRAPHS:
        # Set before each run: the model's code of the run before may have
        # put something else under the name.
        local_kernel.execute("prices = [3, 1, 2]").assert_ok()
        ask = local_kernel.execute(
            f"%%ask {graph} --new\nWhat is the sum of prices?",
            timeout=ASK_TIMEOUT,
        )
        check_ask_cell(local_kernel, ask)
        if "--informer" in graph:
            found = [p["data"]["text/plain"] for p in panels(ask, "key_information")]
            assert found and "list, 3 items of int" in found[0], ask.describe()
    assert local_kernel.execute("1 + 1").assert_ok().result()["text/plain"] == "2"


def test_undo_puts_back_what_the_local_models_code_changed(local_kernel, settings_file) -> None:
    # Whatever the model's code does to the namespace, the "changed" panel
    # lists it and %ask_undo puts it back: sampled afresh until a run
    # changed something (as in the test above).
    deadline = time.monotonic() + ASK_TIMEOUT
    changed, asks = [], []
    while not changed and len(asks) < ASK_ATTEMPTS and time.monotonic() < deadline:
        sample_with_seed(settings_file, len(asks))
        local_kernel.execute("prices = [3, 1, 2]").assert_ok()
        ask = local_kernel.execute(
            "%%ask --max-turns 1 --new\nReply with exactly this text:\n\n"
            "```python\nprices.sort()\ntotal = sum(prices)\n```",
            timeout=deadline - time.monotonic(),
        )
        asks.append(ask)
        check_ask_cell(local_kernel, ask)
        changed = [p["data"]["text/plain"] for p in panels(ask, "changes")]
    assert changed, f"a run of the model's code changed something ({len(asks)} attempts)\n{asks[-1].describe()}"
    panel = changed[0]
    added = [line.split()[1].rstrip(":") for line in panel.splitlines() if line.strip().startswith("added ")]
    undo = local_kernel.execute("%ask_undo").assert_ok()
    assert undo.stdout.startswith("Undid the last run: "), undo.describe()
    after = local_kernel.execute(f"(prices, [n for n in {added!r} if n in globals()])").assert_ok()
    assert after.result()["text/plain"] == "([3, 1, 2], [])", f"{panel}\n{after.describe()}"


def test_interrupting_the_local_model_stops_the_cell_and_the_kernel_lives_on(local_kernel) -> None:
    msg_id = local_kernel.kc.execute("%%ask\nWrite a very long essay about the history of the Python language.")
    local_kernel.wait_for(
        "iopub",
        lambda m: m["parent_header"].get("msg_id") == msg_id
        and m["msg_type"] == "stream"
        and not m["content"]["text"].startswith("(starting the local model"),
        "the model's first streamed text",
        ASK_TIMEOUT,
    )
    local_kernel.km.interrupt_kernel()
    reply = local_kernel.reply_to(msg_id, timeout=10)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    assert local_kernel.execute("1 + 1").assert_ok().result()["text/plain"] == "2"


def test_a_second_kernel_reuses_the_shared_model_and_its_warm_prompt(local_kernel, local_env, tmp_path) -> None:
    """The first kernel's %%ask starts the shared server; shut down, the
    kernel leaves it running, and a new kernel's first %%ask is served by
    it, its prompt's shared prefix (the instructions and the toolbox) taken
    from the server's cache."""
    first = local_kernel.execute("%%ask --max-turns 1\nSay hello.", timeout=ASK_TIMEOUT)
    summary = panels(first, "summary")[0]["data"]["text/plain"]
    assert "shared server, started" in summary, first.describe()
    (server,) = local_model_servers(tmp_path / "runtime")
    # Ended as jupyter_client ends a kernel: its whole process group.
    local_kernel.km.shutdown_kernel(now=True)
    assert server.is_running() and server.status() != psutil.STATUS_ZOMBIE

    km, kc = start_new_kernel(kernel_name=KERNEL_NAME, startup_timeout=60, cwd=str(tmp_path), env=local_env)
    try:
        second = Kernel(km, kc).execute("%%ask --max-turns 1 --new\nSay hello.", timeout=ASK_TIMEOUT)
        summary = panels(second, "summary")[0]["data"]["text/plain"]
        assert "shared server, reused" in summary, second.describe()
        assert " from cache)" in summary, f"the first call of a new kernel reused the cached prompt: {summary}"
        assert [p.pid for p in local_model_servers(tmp_path / "runtime")] == [server.pid]
    finally:
        kc.stop_channels()
        km.shutdown_kernel()

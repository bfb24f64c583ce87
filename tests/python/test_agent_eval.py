"""bench/agent_eval.py, run as a user runs it: with its replay provider every
task of the suite must be solved by every graph (the reference solutions pass
their checkers through the real kernel, so the harness, the tasks and the
checkers agree), and a short slice runs against the local model (plumbing:
the report comes out with its figures, whatever the model answers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import KERNEL_NAME

pytestmark = pytest.mark.skipif(KERNEL_NAME != "mahtab", reason="%%ask is mahtab's")

ROOT = Path(__file__).resolve().parents[2]
EVAL = ROOT / "bench" / "agent_eval.py"
GRAPHS = ("single", "default", "analyst", "planner", "triage")

# 36 tasks x 5 graphs, each in a fresh kernel; replayed answers are instant.
REPLAY_TIMEOUT = 1200
# One task, the single-shot baseline and the default graph: the local model
# loads once and answers a few calls.
LOCAL_TIMEOUT = 600


def run_eval(tmp_path, *args, env=None, timeout):
    out = tmp_path / "eval.json"
    completed = subprocess.run(
        [sys.executable, str(EVAL), "--json", str(out), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    # (What it printed: the report, and each task's line as it ended.)
    return json.loads(out.read_text()), completed.stdout + completed.stderr


def test_with_replayed_solutions_every_graph_solves_every_task(tmp_path) -> None:
    report, printed = run_eval(tmp_path, "--replay", "--strict", timeout=REPLAY_TIMEOUT)
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from agent_tasks import TASKS
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert len(TASKS) >= 30
    assert {t.kind for t in TASKS} == {"pandas", "numpy", "matplotlib", "files", "errors", "data"}
    assert [row["graph"] for row in report["summary"]] == list(GRAPHS)
    for row in report["summary"]:
        assert row["solved"] == row["tasks"] == len(TASKS), row
        assert row["mean_turns"] >= 1 and row["tokens"] > 0, row
    for graph in GRAPHS:
        assert f"\n{graph} " in printed and f"{len(TASKS)}/{len(TASKS)}" in printed, printed


def bench_module(name: str):
    """A module of bench/, imported."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(ROOT / "bench"))


def run_with_solution(name: str, solution: str):
    """The Result of task `name` through the kernel, one turn of the default
    graph, with the replay provider answering `solution`."""
    agent_eval = bench_module("agent_eval")
    task = next(t for t in agent_eval.TASKS if t.name == name)
    replayed = type(task)(**{**task.__dict__, "solution": solution})
    replay = agent_eval.ReplayProvider([replayed])
    try:
        env = {k: v for k, v in os.environ.items() if k not in agent_eval.PROVIDER_VARIABLES}
        env.update(replay.env())
        ksm = agent_eval.KernelSpecManager()
        ksm.kernel_dirs = [str(agent_eval.VENV_KERNELS)]
        return agent_eval.run_task(ksm, env, "default", replayed, 120, max_turns=1)
    finally:
        replay.close()


def test_a_checker_fails_when_the_work_is_not_done(tmp_path) -> None:
    # The replay provider answers every request with the solution of the
    # task it names; a task it cannot find gets code that does nothing, and
    # the checker must then say "not solved".
    agent_eval = bench_module("agent_eval")
    body = {"messages": [{"role": "system", "content": "You are an assistant working inside a Jupyter notebook"},
                         {"role": "user", "content": "something no task asks"}]}
    assert agent_eval.replay_answer(body, agent_eval.TASKS) == "```python\nprint('no task found')\n```"
    # Through the kernel: a task whose solution is withheld is not solved.
    result = run_with_solution("data_warmest", "pass")
    assert not result.solved and result.turns == 1, result


# Answers that look right but are not: a new object where the request asks
# to change one itself, a rename that drops the data, the wrong plot.
WRONG_ANSWERS = [
    ("pandas_rename", "sales = sales.rename(columns={'qty': 'quantity'})"),
    ("pandas_rename", "sales.insert(1, 'quantity', 0)\ndel sales['qty']"),
    ("pandas_fill_missing", "people = people.fillna(people['age'].mean())"),
    ("data_clean_emails", "emails = [e.strip().lower() for e in emails]"),
    ("plot_sine", "import matplotlib.pyplot as plt\nplt.plot(xs, np.cos(xs))\nplt.show()"),
    ("plot_scatter", "import matplotlib.pyplot as plt\nplt.scatter(weights, heights)\nplt.show()"),
    ("plot_histogram", "import matplotlib.pyplot as plt\nplt.hist(ages, bins=10)\nplt.show()"),
    ("plot_bar_file", "import matplotlib.pyplot as plt\nplt.bar(['apple', 'pear'], [5, 1])\nplt.savefig('qty.png')"),
]


@pytest.mark.parametrize(("name", "wrong"), WRONG_ANSWERS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(WRONG_ANSWERS)])
def test_a_checker_passes_no_plausible_wrong_answer(name: str, wrong: str) -> None:
    result = run_with_solution(name, wrong)
    # The wrong code ran (one turn, no error of its own), and was not taken.
    assert result.turns == 1 and not result.solved, result


def test_the_local_model_runs_a_slice_of_the_suite_beside_the_single_shot_baseline(tmp_path) -> None:
    report, printed = run_eval(
        tmp_path, "--local", "--graphs", "single,default", "--only", "pandas_groupby",
        "--max-turns", "2", "--timeout", "240", timeout=LOCAL_TIMEOUT,
    )
    assert [row["graph"] for row in report["summary"]] == ["single", "default"], report["summary"]
    assert all(row["tasks"] == 1 for row in report["summary"]), report["summary"]
    results = report["results"]
    # Every task reached the model and came back, whatever the model made
    # of it: a report, not a judgement of the model.
    assert all(r["error"] == "" or r["error"].startswith(("check", "0 figures")) for r in results), results
    assert all(r["turns"] >= 1 and r["input_tokens"] > 0 and r["calls"] for r in results), results
    # Each call says whether it was a turn of the conversation and what the
    # server had cached; the first is a turn, with its time to the first text.
    assert all(r["calls"][0]["shown"] and r["calls"][0]["first_text_seconds"] > 0 for r in results), results
    assert all(0 <= c["cached_tokens"] <= c["input_tokens"] for r in results for c in r["calls"]), results
    assert all(r["turns"] == 1 for r in results if r["graph"] == "single"), results
    # The local server gives its tokens' odds: a run its judge passed says
    # how sure the judge was, so claims can be weighed again offline.
    judged = [r for r in results if r["outcome"] in ("Complete", "Unconfirmed")]
    assert all(r["confidence"] is not None and 0 <= r["confidence"] <= 100 for r in judged), results
    assert report["provider"].startswith("local model coder-1.5b"), report["provider"]
    assert "turn 2" in printed and "cached" in printed and "median ok" in printed, printed
    # Each graph started with a fresh server: its first call had nothing cached.
    assert all(row["cold_first_text"] > 0 for row in report["summary"]), report["summary"]


# -- the public benchmarks' items -------------------------------------------------

BENCHMARKS = ROOT.parent / "shared" / "benchmarks"
needs_benchmarks = pytest.mark.skipif(not (BENCHMARKS / "ds1000").is_dir(),
                                      reason=f"no benchmark data beside the repository ({BENCHMARKS})")


def public_tasks():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from public_tasks import public_tasks as convert
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return convert(BENCHMARKS)


@needs_benchmarks
def test_every_public_task_passes_its_reference_and_refuses_a_wrong_answer(tmp_path, monkeypatch) -> None:
    """Each converted item, with this environment's pandas and numpy: its
    checker (the problem's own test, or the labels) takes the reference
    answer and refuses a wrong one, before any run counts it."""
    tasks = public_tasks()
    assert len([t for t in tasks if t.name.startswith("ds1000_")]) >= 200, len(tasks)
    assert len([t for t in tasks if t.name.startswith("dabench_")]) >= 100, len(tasks)
    wrong = []
    for task in tasks:
        outcomes = []
        for code in (task.solution, task.wrong_solution):
            folder = tmp_path / f"{task.name}-{len(outcomes)}"
            folder.mkdir()
            monkeypatch.chdir(folder)
            for name, text in task.files.items():
                (folder / name).write_text(text)
            names = {"__name__": "__main__"}
            try:
                exec(task.hidden_setup, names)
                exec(task.setup, names)
                exec(code, names)
                outcomes.append(eval(task.check, names) is True)
            except Exception:  # a failing check refuses the answer
                outcomes.append(False)
        if outcomes != [True, False]:
            wrong.append((task.name, outcomes))
    assert not wrong, wrong


@needs_benchmarks
def test_a_dabench_key_in_the_formats_notation_names_the_answer() -> None:
    """`@mean[mean_value]`, `mean[mean_value]` and `@mean` all name `mean`,
    as the benchmark's own parser reads them; another name does not."""
    task = next(t for t in public_tasks() if t.name.startswith("dabench_"))
    reference = task.solution.removeprefix("answers = ")

    def passes(key_form: str) -> bool:
        names = {"__name__": "__main__"}
        exec(task.hidden_setup, names)
        answers = {key_form.format(name=key): value for key, value in eval(reference).items()}
        names["answers"] = answers
        return eval(task.check, names) is True

    assert passes("@{name}[value]") and passes("{name}[value]") and passes("{name}") and passes("@{name}")
    assert not passes("{name}_value") and not passes("@{name}_value")


@needs_benchmarks
def test_public_tasks_run_through_the_kernel_and_split_once(tmp_path) -> None:
    report, printed = run_eval(
        tmp_path, "--replay", "--strict", "--suite", "public", "--split", "held-out", "--sample", "6",
        "--graphs", "single,default", timeout=REPLAY_TIMEOUT,
    )
    names = {r["task"] for r in report["results"]}
    assert len(names) == 6 and all(r["solved"] for r in report["results"]), report["results"]
    assert "split held-out" in report["provider"], report["provider"]
    # Held-out tasks are never read one by one: a run of them names none.
    assert not [name for name in names if name in printed], printed
    assert "  default  task 12 of 12" in printed, printed
    # The split is drawn from each task's name with a fixed seed: these six
    # are held-out tasks wherever and whenever the split is drawn.
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from agent_eval import split_of
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert all(split_of(t) == "held-out" for t in public_tasks() if t.name in names)


def test_held_out_tasks_are_not_shown_one_by_one() -> None:
    for shown in (["--show"], ["--local", "--prompts", "calls.jsonl"]):
        completed = subprocess.run(
            [sys.executable, str(EVAL), "--split", "held-out", *shown],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert completed.returncode == 2, completed.stderr
        assert "--show and --prompts are for --split dev" in completed.stderr, completed.stderr
    assert not (ROOT / "calls.jsonl").exists()


def test_a_run_resumed_from_its_file_runs_only_what_it_lacks(tmp_path) -> None:
    tasks = ["pandas_pivot", "plot_title", "numpy_spread"]
    args = ["--replay", "--graphs", "single", "--only", ",".join(tasks)]
    report, _ = run_eval(tmp_path, *args, timeout=REPLAY_TIMEOUT)
    assert sorted(r["task"] for r in report["results"]) == sorted(tasks)
    tasks = [r["task"] for r in report["results"]]  # in the suite's order
    out = tmp_path / "eval.json"

    def resume():
        return subprocess.run(
            [sys.executable, str(EVAL), "--json", str(out), "--resume", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=REPLAY_TIMEOUT,
        )

    # As if the run had stopped after its first task.
    report["results"] = report["results"][:1]
    out.write_text(json.dumps(report))
    completed = resume()
    assert completed.returncode == 0, completed.stdout + completed.stderr
    ran = [line.split()[1] for line in completed.stderr.splitlines() if line.startswith("  single ")]
    assert ran == tasks[1:], completed.stderr
    resumed = json.loads(out.read_text())
    assert [r["task"] for r in resumed["results"]] == tasks
    assert resumed["summary"][0]["tasks"] == 3 and resumed["summary"][0]["solved"] == 3, resumed["summary"]
    # Results of another build are another measurement: not resumed.
    resumed["kernel"]["sha256"] = "0" * 64
    out.write_text(json.dumps(resumed))
    refused = resume()
    assert refused.returncode != 0 and "another mahtab binary" in refused.stderr, refused.stderr


def test_the_runs_a_judge_passed_are_weighed_again_at_each_bar() -> None:
    """Each bar counts the claims whose judge was at least that sure, and the
    wrong ones among them; a run the judge did not pass, or one without
    odds, counts at no bar."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import agent_eval
    finally:
        sys.path.remove(str(ROOT / "bench"))

    def run(task, solved, outcome, confidence):
        return agent_eval.Result("default", task, "kind", solved, 1.0, outcome=outcome,
                                 confidence=confidence)

    judged = [run("a", True, "Complete", 95), run("b", False, "Complete", 82),
              run("c", True, "Unconfirmed", 72), run("d", False, "Repeating", None)]
    assert agent_eval.done_at(judged[:3], 1) == [[70, 3, 1], [80, 2, 1], [85, 1, 0], [90, 1, 0]]
    assert agent_eval.done_at([run("e", True, "Complete", None)], 1) == []
    row = agent_eval.summarize(judged, ["default"])[0]
    assert (row["done_claims"], row["done_wrong"]) == (2, 1)
    assert row["done_at"][1] == [80, 2, 1]
    assert row["cut_off"] == 0
    # Beside odds, a "done" without them was settled by code.
    by_code = judged + [run("e", False, "Complete", None), run("f", True, "Complete", None)]
    row = agent_eval.summarize(by_code, ["default"])[0]
    assert (row["done_claims"], row["done_wrong"]) == (4, 2)
    assert (row["done_by_code"], row["done_by_code_wrong"]) == (2, 1)
    # An answer the length limit cut off is counted (results kept before the
    # trace recorded it have no such field).
    call = {"shown": True, "purpose": "code", "first_text_seconds": 1.0, "seconds": 2.0,
            "input_tokens": 10, "cached_tokens": 0, "output_tokens": 5}
    judged[3].calls = [dict(call, cut_off_text="```python\nx = [1,"), dict(call, cut_off_text=None), call]
    assert agent_eval.summarize(judged, ["default"])[0]["cut_off"] == 1


def test_a_cell_with_no_reply_in_time_keeps_what_it_showed() -> None:
    """A run that never ends is reported with the output it streamed, so the
    one that hangs can be read (a stand-in client: no kernel is needed)."""
    from queue import Empty

    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import agent_eval
    finally:
        sys.path.remove(str(ROOT / "bench"))

    class Client:
        def __init__(self):
            self.iopub = [{"parent_header": {"msg_id": "m"}, "msg_type": "stream",
                           "content": {"name": "stdout", "text": "[code, turn 1]\nwhile True: pass\n"}}]

        def execute(self, *args, **kwargs):
            return "m"

        def get_shell_msg(self, timeout):
            raise Empty

        def get_iopub_msg(self, timeout):
            if self.iopub:
                return self.iopub.pop()
            raise Empty

    with pytest.raises(agent_eval.NoReply) as stopped:
        agent_eval.execute(Client(), "%%ask\nloop", 0.5)
    # Where it stalled, in words that hold none of the task: a block shown
    # whose output never came, and the cell silent since.
    said = str(stopped.value)
    assert said.startswith("no reply within 0.5 s (1 block(s) of code, the last one's output not shown; "), said
    assert said.endswith(" s)") and "while" not in said
    ran = [{"msg_type": "stream", "content": {"name": "stdout", "text": "[code, turn 1]\nx = 1\n[output]\n(no output)\n"}}]
    assert agent_eval.where_it_stalled(ran, 42.4) == \
        "1 block(s) of code, the last one's output shown; nothing new for the last 42 s"
    assert agent_eval.where_it_stalled([], 3).startswith("0 block(s) of code, none shown")
    assert agent_eval.transcript(stopped.value.messages) == "[code, turn 1]\nwhile True: pass\n"

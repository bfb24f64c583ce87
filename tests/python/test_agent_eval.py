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
GRAPHS = ("default", "analyst", "planner", "triage")

# 32 tasks x 4 graphs, each in a fresh kernel; replayed answers are instant.
REPLAY_TIMEOUT = 900
# One task, one turn: the local model loads in the task's kernel and answers
# twice (the code, the review).
LOCAL_TIMEOUT = 240


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
    return json.loads(out.read_text()), completed.stdout


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


def test_a_checker_fails_when_the_work_is_not_done(tmp_path) -> None:
    # The replay provider answers every request with the solution of the
    # task it names; a task it cannot find gets code that does nothing, and
    # the checker must then say "not solved".
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import agent_eval
    finally:
        sys.path.remove(str(ROOT / "bench"))
    body = {"messages": [{"role": "system", "content": "You are an assistant working inside a Jupyter notebook"},
                         {"role": "user", "content": "something no task asks"}]}
    assert agent_eval.replay_answer(body, agent_eval.TASKS) == "```python\nprint('no task found')\n```"
    # Through the kernel: a task whose solution is withheld is not solved.
    task = next(t for t in agent_eval.TASKS if t.name == "data_warmest")
    unsolvable = type(task)(**{**task.__dict__, "solution": "pass"})
    replay = agent_eval.ReplayProvider([unsolvable])
    try:
        env = {k: v for k, v in os.environ.items() if k not in agent_eval.PROVIDER_VARIABLES}
        env.update(replay.env())
        ksm = agent_eval.KernelSpecManager()
        ksm.kernel_dirs = [str(agent_eval.VENV_KERNELS)]
        result = agent_eval.run_task(ksm, env, "default", unsolvable, 120)
    finally:
        replay.close()
    assert not result.solved and result.turns == 1, result


def test_the_local_model_runs_a_slice_of_the_suite(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY",
                                                             "OPENAI_BASE_URL", "MAHTAB_PROVIDER", "MAHTAB_MODEL")}
    env["MAHTAB_CONFIG"] = os.devnull
    report, printed = run_eval(
        tmp_path, "--graphs", "default", "--only", "data_warmest", "--max-turns", "1", "--timeout", "200",
        env=env, timeout=LOCAL_TIMEOUT,
    )
    (row,) = report["summary"]
    assert row["graph"] == "default" and row["tasks"] == 1, row
    results = report["results"]
    # Every task reached the model and came back with its figures, whatever
    # the model made of it.
    assert all(r["error"] == "" or r["error"].startswith("check") for r in results), results
    assert all(r["turns"] >= 1 and r["input_tokens"] > 0 for r in results), results
    assert "local" in report["provider"] or "embedded" in report["provider"], report["provider"]

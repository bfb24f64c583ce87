"""Evaluate the %%ask agent graphs on a fixed suite of notebook tasks.

Each task (bench/agent_tasks.py: pandas, numpy, matplotlib, files, errors to
fix, questions about data in the namespace) runs in a fresh mahtab kernel, the
one installed in the project venv, started by jupyter_client in an empty
working directory: its setup cell runs, then `ask(prompt, graph=G)`, then its
checker, a Python expression that inspects the namespace or the files (never
the model's text). Beside the graphs, `single` is the single-shot baseline:
the same model answers once and its code runs once, with no review
(`ask(..., once=True, max_turns=1)`). Per graph the report gives the tasks
solved, the mean turns, the tokens, the times to the first text of the
conversation's turns (the first call of the run, with nothing cached; each
task's first turn; its second, with the share of that prompt the model
server's cache held) and of the hidden calls (reviews, plans,
classifications), and the time per task (mean, and median of the solved
ones); --json keeps every task's figures and calls. With --repeat N each task
runs N times and the solved count shows its range.

The provider is whatever the kernel would use: the environment and the
settings file, as for any %%ask cell. --local runs every kernel against one
local model server (Qwen2.5-Coder-1.5B by default; --local coder-0.5b for the
smaller one) that this script starts afresh for each graph, so no task pays
for loading the model and each graph's first call finds nothing cached; the
kernels find it as the shared local model server (in the run's own Jupyter
runtime directory) and use it as their embedded model (same context, answer
length, temperature 0 and seed 0). --replay
instead starts a replay provider on loopback that answers each task with its
reference solution, in the part each graph's nodes expect: that checks the
harness, the tasks and their checkers, not a model. This is a report: it
asserts nothing, and exits 0 unless --strict finds an unsolved task.

The tasks: `--suite own` (the default) is bench/agent_tasks.py; `--suite
public` adds DS-1000's Pandas and Numpy problems and DABench's questions,
converted when the run starts from the benchmark data beside the repository
(bench/public_tasks.py; each task's reference answer passes its check and a
wrong one fails it). Every task belongs to one split, drawn once from its name
with a fixed seed: `--split dev` is what the agent is tuned on, `--split
held-out` what is reported and never read task by task (its runs print no
task's name, and refuse `--show`); `--sample N` takes a
seeded sample of the chosen tasks, the everyday loop (a larger sample begins with
the same tasks, so `--sample 80 --skip 40` is a second sample of 40).

Usage: .venv/bin/python bench/agent_eval.py [--local [coder-1.5b|coder-0.5b]]
            [--graphs single,default,analyst,planner,triage] [--only NAME,...]
            [--suite own,public] [--split dev|held-out|all] [--sample N]
            [--skip N] [--kinds pandas,...] [--limit N] [--max-turns N] [--repeat N]
            [--replay] [--timeout 300] [--json OUT] [--strict] [--kernels DIR] [--show]
"""

import argparse
import hashlib
import json
import os
import random
import re
import statistics
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from queue import Empty
from time import perf_counter

from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

from agent_tasks import FIGURE_RECORDER, IDENTITIES, TASKS
from prompt_log import PromptLog
from public_tasks import DEFAULT_DIR as DEFAULT_BENCHMARKS
from public_tasks import public_tasks

BENCH_DIR = Path(__file__).resolve().parent
VENV_KERNELS = BENCH_DIR.parent / ".venv" / "share" / "jupyter" / "kernels"
# `single` is the single-shot baseline: the default graph, one answer, no review.
GRAPHS = ("single", "default", "analyst", "planner", "triage")

START_TIMEOUT = 60.0
SETUP_TIMEOUT = 60.0
CHECK_TIMEOUT = 30.0

# The seed of the split into development and held-out tasks (and of --sample).
SPLIT_SEED = "mahtab-eval-split-1"

# What the harness must not inherit: a replay or local run talks to its own server.
PROVIDER_VARIABLES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MAHTAB_PROVIDER",
                      "MAHTAB_MODEL", "MAHTAB_CONFIG", "MAHTAB_LOCAL_MODEL", "MAHTAB_LOCAL_MODEL_URL",
                      "MAHTAB_TEMPERATURE", "MAHTAB_SEED", "MAHTAB_CANDIDATES", "MAHTAB_CROSS_CHECKS")

# The local models' files and context windows (src/agent/llm/local.rs).
LOCAL_MODELS = {
    "coder-1.5b": ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", 16384),
    "coder-0.5b": ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 16384),
}
LOCAL_SERVER = BENCH_DIR.parent / "src" / "agent" / "llm" / "local" / "server.py"
VENV_PYTHON = BENCH_DIR.parent / ".venv" / "bin" / "python"


@dataclass
class Result:
    graph: str
    task: str
    kind: str
    solved: bool
    seconds: float
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    images: int = 0
    error: str = ""
    repeat: int = 0
    # How the run ended, as `ask()` says ("Complete" is a "done" claim).
    outcome: str = ""
    # How sure the judge was of its last "done", in percent, where the
    # provider says (None otherwise): claims can be weighed again offline.
    confidence: int | None = None
    # What solutions written independently said of a judged "done"
    # ("agreed", "differed"), where they were compared.
    cross_check: str | None = None
    # Each model call, in order: {"shown", "purpose", "first_text_seconds",
    # "seconds", "input_tokens", "cached_tokens", "output_tokens"} (the
    # kernel's trace).
    calls: list = field(default_factory=list)
    # Each node visited, in order: {"node", "seconds"}.
    steps: list = field(default_factory=list)


# -- the replay provider --------------------------------------------------------

# Which node asks, by a phrase of its system prompt (prompts/*.md).
NODES = (
    ("You review the work of an assistant", "review"),
    ("say what the variable it names must hold", "form"),
    ("You answer a request made in a Jupyter notebook", "prose"),
    ("You work in steps.", "planner"),
    ("You plan how to handle a request", "triage_plan"),
    ("You are an assistant working inside a Jupyter notebook", "code"),
)

# Which node asks, by a phrase of the question its last message ends with.
QUESTIONS = (
    ("choose the agent that suits it best", "classify"),
    ("Do not answer my request yet", "analyst_plan"),
    ("Before the final answer, examine the results above", "prose"),
    ("Now answer my request in plain language", "prose"),
)


def replay_answer(body, tasks):
    """What the replay provider answers: the task's solution, in the form
    the asking node reads."""
    messages = body.get("messages", [])
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    said = "\n".join(m["content"] for m in messages if m["role"] != "system")
    node = next((name for phrase, name in NODES if phrase in system), "code")
    # The triage's classification and the analyst's plan, evaluation and
    # explanation are questions after the code turns' conversation, under
    # their system prompt.
    last = messages[-1]["content"] if messages else ""
    node = next((name for phrase, name in QUESTIONS if phrase in last), node)
    task = next((t for t in tasks if t.prompt in said or t.prompt in system), None)
    solution = task.solution if task else "print('no task found')"
    fenced = f"```python\n{solution}\n```"
    if node == "review":
        return '{"is_complete": true, "reasoning": "the checker decides", "next_action": ""}'
    if node == "form":
        return '{"form": "cannot tell"}'
    if node == "analyst_plan":
        return '{"needs_code": true, "needs_evaluation": false, "reasoning": "it needs code"}'
    if node == "classify":
        # Unsure, so that the triage plans too.
        return '{"agent": "default", "confidence": 0.5}'
    if node == "triage_plan":
        plan = {"action": "delegate", "agent": "default", "task": task.prompt if task else said}
        return json.dumps(plan)
    if node == "planner":
        if "Observation:" in said:
            return "Thought: the code ran.\nFinal Answer: done."
        return f"Thought: I will solve it with code.\nAction: python\nAction Input:\n{fenced}"
    if node == "prose":
        return "The output above answers the request."
    # A code-writing node: once its code ran, it answers in words.
    return "Done." if "This code ran" in said else fenced


class ReplayProvider:
    """An OpenAI-compatible streaming server on loopback, in a thread."""

    def __init__(self, tasks):
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                # The context window, as llama.cpp's server says it.
                if self.path != "/props":
                    self.send_error(404)
                    return
                payload = json.dumps({"default_generation_settings": {"n_ctx": 32768}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                text = replay_answer(body, tasks)
                prompt_tokens = len(json.dumps(body)) // 4
                events = [
                    {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
                    {"choices": [], "usage": {"prompt_tokens": prompt_tokens,
                                              "completion_tokens": len(text) // 4 + 1}},
                ]
                payload = b"".join(b"data: %s\n\n" % json.dumps(e).encode() for e in events)
                payload += b"data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def env(self):
        host, port = self.server.server_address
        return {"OPENAI_BASE_URL": f"http://{host}:{port}/v1", "MAHTAB_MODEL": "replay",
                "MAHTAB_CONFIG": os.devnull}

    def close(self):
        self.server.shutdown()


# -- running a task -------------------------------------------------------------

class NoReply(TimeoutError):
    """No reply in time; `messages` holds what the cell showed until then,
    and the message says where the run was, without its content (held-out
    runs are read in totals only)."""

    def __init__(self, timeout, messages, silent):
        super().__init__(f"no reply within {timeout:g} s ({where_it_stalled(messages, silent)})")
        self.messages = messages


def where_it_stalled(messages, silent):
    """How far a run that never ended got: the blocks of code its cell
    showed, whether the last had printed its output, and how long the
    cell had shown nothing (`silent` seconds): a block still running, or a
    model call that did not end."""
    shown = transcript(messages)
    blocks = shown.count("[code, turn ")
    last = shown[shown.rfind("[code, turn "):] if blocks else ""
    ran = "[output]" in last or "[error]" in last
    state = "none shown" if not blocks else "the last one's output shown" if ran else "the last one's output not shown"
    return f"{blocks} block(s) of code, {state}; nothing new for the last {silent:.0f} s"


def execute(kc, code, timeout, user_expressions=None, store_history=True):
    """Runs `code`; returns (reply content, iopub messages of the request).
    Without `store_history` the cell is not one the agent sees as the user's.
    Past `timeout`, raises NoReply with the messages so far."""
    msg_id = kc.execute(code, user_expressions=user_expressions or {}, allow_stdin=False,
                        store_history=store_history)
    deadline = perf_counter() + timeout
    messages, reply, idle, heard = [], None, False, perf_counter()
    while reply is None or not idle:
        remaining = deadline - perf_counter()
        if remaining <= 0:
            raise NoReply(timeout, messages, perf_counter() - heard)
        if reply is None:
            try:
                msg = kc.get_shell_msg(timeout=0.05)
                if msg["parent_header"].get("msg_id") == msg_id:
                    reply = msg["content"]
            except Empty:
                pass
        try:
            msg = kc.get_iopub_msg(timeout=min(remaining, 0.2))
        except Empty:
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        heard = perf_counter()
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            idle = True
    return reply, messages


def transcript(messages):
    """What the run showed in its cell, as text: the streamed words and the
    plain text of each panel (the last version of each updated one)."""
    parts, panels = [], {}
    for m in messages:
        kind, content = m["msg_type"], m["content"]
        if kind == "stream":
            parts.append(content["text"])
        elif kind in ("display_data", "update_display_data", "execute_result", "error"):
            text = (f"{content['ename']}: {content['evalue']}" if kind == "error"
                    else content.get("data", {}).get("text/plain", ""))
            display = content.get("transient", {}).get("display_id")
            if kind == "update_display_data" and display in panels:
                parts[panels[display]] = text + "\n"
            else:
                if display:
                    panels[display] = len(parts)
                parts.append(text + "\n")
    return "".join(parts)


def run_task(ksm, env, graph, task, timeout, max_turns=None, show=False):
    """One task with one graph in a fresh kernel; its Result (with `show`,
    the cell's transcript goes to stderr)."""
    with tempfile.TemporaryDirectory(prefix="mahtab-eval-") as cwd:
        for name, text in task.files.items():
            Path(cwd, name).write_text(text)
        km = KernelManager(kernel_name="mahtab", kernel_spec_manager=ksm)
        started = perf_counter()
        try:
            km.start_kernel(cwd=cwd, env=dict(env, JUPYTER_DATA_DIR=str(Path(cwd, ".jupyter"))))
            kc = km.client()
            kc.start_channels()
            kc.wait_for_ready(timeout=START_TIMEOUT)
            # The checkers' helpers, in cells the agent does not see.
            steps = ((FIGURE_RECORDER, "recorder"), (task.hidden_setup, "checker"), (task.setup, "setup"),
                     (IDENTITIES, "identities"))
            for code, what in steps:
                if code:
                    reply, _ = execute(kc, code, SETUP_TIMEOUT, store_history=what == "setup")
                    if reply["status"] != "ok":
                        raise RuntimeError(f"{what} failed: {reply.get('ename')}: {reply.get('evalue')}")
            started = perf_counter()
            if graph == "single":
                how = "graph='default', max_turns=1, once=True"
            else:
                how = f"graph={graph!r}, max_turns={max_turns!r}"
            ask = (f"_eval_answer = ask({task.prompt!r}, {how}, new=True, allow=['files'])\n"
                   "import json as _eval_json\n"
                   "print(_eval_json.dumps(dict(_eval_answer.trace, outcome=str(_eval_answer.outcome))))")
            try:
                reply, messages = execute(kc, ask, timeout)
            except NoReply as stopped:
                # What the cell showed until then is all there is to read
                # of a run that never ended.
                if show:
                    print(f"--- {graph} · {task.name}\n{transcript(stopped.messages).rstrip()}\n"
                          f"[{stopped}: the cell's output until then]\n---", file=sys.stderr, flush=True)
                raise
            seconds = perf_counter() - started
            if show:
                print(f"--- {graph} · {task.name}\n{transcript(messages).rstrip()}\n---",
                      file=sys.stderr, flush=True)
            images = sum(1 for m in messages
                         if m["msg_type"] == "display_data" and "image/png" in m["content"]["data"])
            result = Result(graph, task.name, task.kind, False, seconds, images=images)
            if reply["status"] != "ok":
                result.error = f"{reply.get('ename')}: {reply.get('evalue')}"
                return result
            printed = "".join(m["content"]["text"] for m in messages
                              if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")
            trace = json.loads(printed.strip().splitlines()[-1])
            result.turns = trace["turns"]
            result.outcome = trace["outcome"]
            result.confidence = trace.get("confidence")
            result.cross_check = (trace.get("cross_check") or {}).get("result")
            result.calls = trace.get("calls", [])
            result.steps = trace.get("steps", [])
            result.input_tokens = trace["input_tokens"]
            result.output_tokens = trace["output_tokens"]
            check, _ = execute(kc, "", CHECK_TIMEOUT, {"ok": f"bool({task.check})"})
            verdict = check["user_expressions"]["ok"]
            passed = verdict.get("status") == "ok" and verdict["data"]["text/plain"] == "True"
            result.solved = passed and images >= task.images
            if not passed and verdict.get("status") == "error":
                result.error = f"check: {verdict.get('ename')}: {verdict.get('evalue')}"
            elif images < task.images:
                result.error = f"{images} figures shown, {task.images} wanted"
            return result
        except Exception as error:  # a kernel that failed is reported, not fatal
            return Result(graph, task.name, task.kind, False, perf_counter() - started,
                          error=f"{type(error).__name__}: {error}")
        finally:
            try:
                kc.stop_channels()
            except Exception:
                pass
            km.shutdown_kernel(now=True)


# -- the report -----------------------------------------------------------------

def summarize(results, graphs):
    rows = []
    for graph in graphs:
        mine = [r for r in results if r.graph == graph]
        if not mine:
            continue
        repeats = sorted({r.repeat for r in mine})
        solved_per_repeat = [sum(r.solved for r in mine if r.repeat == k) for k in repeats]
        turns = [[c for c in r.calls if c["shown"]] for r in mine]
        first_turns = [t[0] for t in turns if t]
        second_turns = [t[1] for t in turns if len(t) > 1]
        hidden = [c for r in mine for c in r.calls if not c["shown"]]
        # The graph's first call: its server was started afresh.
        cold = next((r.calls[0] for r in mine if r.repeat == 0 and r.calls), None)
        solved_times = [r.seconds for r in mine if r.solved]
        claimed = [r for r in mine if r.outcome == "Complete"]
        unsure = [r for r in mine if r.outcome == "Unconfirmed"]
        differed = [r for r in unsure if r.cross_check == "differed"]
        rows.append({
            "graph": graph,
            "solved": statistics.mean(solved_per_repeat),
            "solved_min": min(solved_per_repeat),
            "solved_max": max(solved_per_repeat),
            "tasks": len(mine) // len(repeats),
            "repeats": len(repeats),
            "mean_turns": statistics.mean(r.turns for r in mine),
            "tokens": sum(r.input_tokens + r.output_tokens for r in mine) // len(repeats),
            "cold_first_text": cold and cold["first_text_seconds"],
            "first_turn_text": mean_first_text(first_turns),
            "second_turn_text": mean_first_text(second_turns),
            "second_turn_cached": (sum(c["cached_tokens"] for c in second_turns)
                                   / max(1, sum(c["input_tokens"] for c in second_turns))
                                   if second_turns else None),
            "hidden_text": mean_first_text(hidden),
            "mean_seconds": statistics.mean(r.seconds for r in mine),
            "median_solved_seconds": statistics.median(solved_times) if solved_times else None,
            "done_claims": len(claimed) // len(repeats),
            "done_wrong": sum(not r.solved for r in claimed) // len(repeats),
            "unconfirmed": len(unsure) // len(repeats),
            "unconfirmed_wrong": sum(not r.solved for r in unsure) // len(repeats),
            # (Without the runs the cross-check left unconfirmed: no bar
            # would have made them claims.)
            "done_at": done_at(claimed + [r for r in unsure if r not in differed], len(repeats)),
            "cross_checked": sum(r.cross_check == "agreed" for r in claimed) // len(repeats),
            "cross_checked_wrong": sum(r.cross_check == "agreed" and not r.solved for r in claimed)
            // len(repeats),
            "differed": len(differed) // len(repeats),
            "differed_wrong": sum(not r.solved for r in differed) // len(repeats),
            # Where the provider gives the judge's odds, a "done" without
            # them was settled by code (the result the request writes out).
            "done_by_code": sum(r.confidence is None for r in claimed) // len(repeats),
            "done_by_code_wrong": sum(r.confidence is None and not r.solved for r in claimed) // len(repeats),
            # Answers the length limit cut off (their text is in the calls).
            "cut_off": sum(c.get("cut_off_text") is not None for r in mine for c in r.calls),
        })
    return rows


# The bars for "done" a run's claims are weighed again at, in percent.
BARS = (70, 80, 85, 90)


def done_at(judged, repeats):
    """For each bar in BARS, the "done" claims and wrong ones the runs the
    judge passed would have made with it: [bar, claims, wrong], or empty
    where the provider gave no odds. One bar for every run: a run whose
    work was sent back twice or more needed 90% (`Verdict::needed_after`),
    so at a lower bar the recount counts it where the run ended unsure."""
    weighed = [r for r in judged if r.confidence is not None]
    if not weighed:
        return []
    return [[bar, sum(r.confidence >= bar for r in weighed) // repeats,
             sum(r.confidence >= bar and not r.solved for r in weighed) // repeats]
            for bar in BARS]


def mean_first_text(calls):
    seconds = [c["first_text_seconds"] for c in calls if c["first_text_seconds"] is not None]
    return statistics.mean(seconds) if seconds else None


def progress_line(result, number, total, named):
    """The line printed as a task ends: its graph, name, time and outcome,
    or, for held-out tasks (never read one by one), only how far the run is
    and whether it solved."""
    if not named:
        mark = "solved" if result.solved else "not solved"
        return f"  {result.graph:<8} task {number} of {total}  {result.seconds:6.1f}s  {mark}"
    mark = "solved" if result.solved else f"not solved ({result.error or 'check false'})"
    return f"  {result.graph:<8} {result.task:<24} {result.seconds:6.1f}s  {mark}"


def print_report(rows, results, provider, named=True):
    print(f"\nagent evaluation · {provider}\n")
    seconds = lambda value: "-" if value is None else f"{value:.1f}s"  # noqa: E731
    percent = lambda value: "-" if value is None else f"{value:.0%}"  # noqa: E731
    print(f"{'graph':<8} {'solved':>11} {'turns':>6} {'tokens':>9} {'cold':>6} {'turn 1':>7} {'turn 2':>7} "
          f"{'cached':>7} {'hidden':>7} {'per task':>9} {'median ok':>10} {'done, wrong':>12} {'unsure, wrong':>14}")
    for row in rows:
        solved = f"{row['solved']:g}/{row['tasks']}"
        if row["solved_min"] != row["solved_max"]:
            solved += f" ({row['solved_min']}-{row['solved_max']})"
        print(f"{row['graph']:<8} {solved:>11} {row['mean_turns']:>6.1f} {row['tokens']:>9,} "
              f"{seconds(row['cold_first_text']):>6} {seconds(row['first_turn_text']):>7} "
              f"{seconds(row['second_turn_text']):>7} {percent(row['second_turn_cached']):>7} "
              f"{seconds(row['hidden_text']):>7} "
              f"{seconds(row['mean_seconds']):>9} {seconds(row['median_solved_seconds']):>10} "
              f"{done_wrong(row):>12} {unsure_wrong(row):>14}")
    for row in rows:
        if row["done_claims"] and row["done_at"]:
            judged = row["done_claims"] - row["done_by_code"]
            judged_wrong = row["done_wrong"] - row["done_by_code_wrong"]
            print(f"{row['graph']}: \"done\" claims (wrong) settled by code {row['done_by_code']} "
                  f"({row['done_by_code_wrong']}) · passed by the judge {judged} ({judged_wrong})")
    for row in rows:
        if row["cross_checked"] or row["differed"]:
            print(f"{row['graph']}: \"done\" claims (wrong) another solution written independently confirmed "
                  f"{row['cross_checked']} ({row['cross_checked_wrong']}) · passed by the judge but left "
                  f"unconfirmed as every other solution computed otherwise {row['differed']} "
                  f"({row['differed_wrong']})")
    for row in rows:
        if row["done_at"]:
            bars = " · ".join(f"{bar}%: {claims} ({wrong})" for bar, claims, wrong in row["done_at"])
            print(f"{row['graph']}: \"done\" claims (wrong) had the judge's bar been {bars}")
    for row in rows:
        if row["cut_off"]:
            print(f"{row['graph']}: {row['cut_off']} answers cut off at the length limit "
                  "(their text: cut_off_text in the --json file's calls)")
    failed = [r for r in results if not r.solved]
    if failed and not named:
        print(f"\n{len(failed)} runs not solved (held-out tasks are not named)")
    elif failed:
        print("\nnot solved:")
        for r in failed:
            again = f" (run {r.repeat + 1})" if any(x.repeat for x in results) else ""
            print(f"  {r.graph:<8} {r.task:<24} {r.error or 'the check is false'}{again}")
    print("\n(turns and times are means per task, tokens totals per run of the suite; times to the first"
          "\n text: cold, the graph's first call with nothing cached; turn 1 and turn 2, each task's first and"
          "\n second turns of the conversation; cached, the share of turn 2's prompt the server had cached;"
          "\n hidden, the reviews, plans and classifications; median ok: of solved tasks; done, wrong: the"
          "\n runs that ended \"done\" (a check passed), and how many of them the task's check found wrong;"
          "\n unsure, wrong: the runs whose check passed but whose judge was unsure of it, so they ended"
          "\n \"not confirmed\" rather than \"done\", and how many of them were wrong)")


def done_wrong(row):
    """`claims (wrong)`, or "-" for a graph that never says done (single)."""
    return f"{row['done_claims']} ({row['done_wrong']})" if row["done_claims"] else "-"


def unsure_wrong(row):
    """`unconfirmed runs (wrong)`, or "-" where none ended so."""
    return f"{row['unconfirmed']} ({row['unconfirmed_wrong']})" if row["unconfirmed"] else "-"


class LocalServer:
    """One local model server for every kernel of the run: the shared server
    the kernel itself starts (src/agent/llm/local/server.py, with the same
    arguments), started here in a runtime directory of the run's own, where
    every task's kernel finds and reuses it (JUPYTER_RUNTIME_DIR), so that no
    task pays for loading the model."""

    MARKER = "mahtab-local-model-server"
    SLOTS = 4

    def __init__(self, name, log=None, prompts=None):
        import subprocess

        file, context = LOCAL_MODELS[name]
        found = [d / file for d in self.model_dirs() if (d / file).is_file()]
        if not found:
            sys.exit(f"{file} is not installed: run mahtab local-model --model {name}")
        self.runtime = tempfile.TemporaryDirectory(prefix="mahtab-eval-runtime-")
        os.chmod(self.runtime.name, 0o700)
        server_file = Path(self.runtime.name) / f"mahtab-local-model-{name}.json"
        lock_file = server_file.with_suffix(".lock")
        # No kernel runs yet: nobody to hold the start lock against.
        threads = str(min(os.cpu_count() or 2, 4))
        idle_seconds = str(24 * 3600)  # stopped by close(), not by idling
        self.process = subprocess.Popen(
            [str(VENV_PYTHON), "-c", LOCAL_SERVER.read_text(), self.MARKER, name, str(found[0]), threads,
             str(context), str(self.SLOTS), idle_seconds, str(server_file), str(lock_file)],
            stdout=subprocess.PIPE, stderr=open(log, "a") if log else subprocess.DEVNULL, text=True,
        )
        for line in self.process.stdout:
            if line.startswith("READY "):
                break
        else:
            sys.exit("the local model server did not start")
        self.name = name
        self.prompts = None
        if prompts:
            found = json.loads(server_file.read_text())
            self.prompts = PromptLog(found["url"], found["key"], prompts)

    @staticmethod
    def model_dirs():
        data = os.environ.get("JUPYTER_DATA_DIR") or os.path.expanduser("~/.local/share/jupyter")
        dirs = [Path(data) / "mahtab" / "models", BENCH_DIR.parent / ".venv" / "share" / "jupyter" / "mahtab" / "models"]
        if os.environ.get("MAHTAB_MODELS_DIR"):
            dirs.insert(0, Path(os.environ["MAHTAB_MODELS_DIR"]))
        return dirs

    def env(self):
        env = {"MAHTAB_LOCAL_MODEL": self.name, "JUPYTER_RUNTIME_DIR": self.runtime.name,
               "MAHTAB_CONFIG": os.devnull}
        if self.prompts:
            env["MAHTAB_LOCAL_MODEL_URL"] = self.prompts.url
        return env

    def close(self):
        if self.prompts:
            self.prompts.close()
        self.process.terminate()
        self.process.wait(10)
        self.runtime.cleanup()


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graphs", default=",".join(GRAPHS))
    parser.add_argument("--only", default="", help="task names, comma-separated")
    parser.add_argument("--kinds", default="", help="task kinds, comma-separated")
    parser.add_argument("--limit", type=int, default=0, help="at most this many tasks")
    parser.add_argument("--suite", default="own", help="own (bench/agent_tasks.py), public (DS-1000 and "
                        "DABench items converted from --benchmarks) or own,public")
    parser.add_argument("--split", default="all", choices=("dev", "held-out", "all"),
                        help="the development split (tune on it), the held-out split (report it), or all")
    parser.add_argument("--sample", type=int, default=0,
                        help="a seeded sample of this many of the chosen tasks (the everyday loop)")
    parser.add_argument("--skip", type=int, default=0,
                        help="leave out the first N tasks (after --sample: --sample 80 --skip 40 is the 40 "
                        "that a sample of 40 leaves out, a second sample)")
    parser.add_argument("--benchmarks", type=Path, default=DEFAULT_BENCHMARKS,
                        help="the folder holding ds1000/ and dabench/ (default: ../shared/benchmarks)")
    parser.add_argument("--max-turns", type=int, help="each graph's turn limit (default: its own)")
    parser.add_argument("--replay", action="store_true", help="answer with the reference solutions")
    parser.add_argument("--local", nargs="?", const="coder-1.5b", choices=sorted(LOCAL_MODELS),
                        help="one local model server for every kernel (default coder-1.5b)")
    parser.add_argument("--server-log", help="with --local: write the model server's log here (which slot each "
                        "call took, how much of its prompt was cached)")
    parser.add_argument("--prompts", help="with --local, not --split held-out: append every call's request "
                        "and answer to this file, one JSON line each (bench/prompt_log.py)")
    parser.add_argument("--candidates", type=int,
                        help="other solutions each turn of the default graph tries beside its own "
                             "(default: the kernel's, 0)")
    parser.add_argument("--cross-checks", type=int,
                        help="solutions of the request a judged \"done\" is compared with "
                             "(default: the kernel's, 2)")
    parser.add_argument("--repeat", type=int, default=1, help="run each task this many times")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per task")
    parser.add_argument("--json", help="write every result here")
    parser.add_argument("--resume", action="store_true",
                        help="with --json: keep the results that file holds from the same kernel binary and "
                             "provider, and run only the rest (a split too long for one sitting)")
    parser.add_argument("--strict", action="store_true", help="exit 1 if a task is not solved")
    parser.add_argument("--show", action="store_true",
                        help="print each task's cell (streamed text and panels) to stderr (not with "
                             "--split held-out)")
    parser.add_argument("--kernels", type=Path, default=VENV_KERNELS,
                        help="the kernelspecs directory holding `mahtab` (default: the project venv's);"
                             " a copy of the binary there keeps a long run apart from rebuilds")
    args = parser.parse_args()
    args.graphs = [g for g in args.graphs.split(",") if g]
    unknown = set(args.graphs) - set(GRAPHS)
    if unknown:
        parser.error(f"unknown graphs {sorted(unknown)}; known: {', '.join(GRAPHS)}")
    if (args.show or args.prompts) and args.split == "held-out":
        parser.error("held-out tasks are not read one by one: --show and --prompts are for --split dev")
    if args.prompts and not args.local:
        parser.error("--prompts logs the calls to the local model: it needs --local")
    return args


def split_of(task):
    """The task's split, drawn once from its name with a fixed seed: about
    half the tasks are held out, never read one by one while tuning."""
    draw = int(hashlib.sha256(f"{SPLIT_SEED}:{task.name}".encode()).hexdigest(), 16)
    return "held-out" if draw % 2 else "dev"


def chosen_tasks(args):
    tasks = list(TASKS) if "own" in args.suite else []
    if "public" in args.suite:
        public = public_tasks(args.benchmarks)
        if not public:
            sys.exit(f"no benchmark data in {args.benchmarks} (--benchmarks names the folder)")
        tasks += public
    if args.split != "all":
        tasks = [t for t in tasks if split_of(t) == args.split]
    if args.only:
        names = set(args.only.split(","))
        missing = names - {t.name for t in tasks}
        if missing:
            sys.exit(f"unknown tasks: {sorted(missing)}")
        tasks = [t for t in tasks if t.name in names]
    if args.sample:
        tasks = random.Random(SPLIT_SEED).sample(tasks, min(args.sample, len(tasks)))
    tasks = tasks[args.skip:]
    # Of a sample, its tasks of these kinds: the same tasks as in a run of
    # the whole sample.
    if args.kinds:
        kinds = set(args.kinds.split(","))
        tasks = [t for t in tasks if t.kind in kinds]
    return tasks[: args.limit] if args.limit else tasks


def main():
    args = parse_args()
    if not (args.kernels / "mahtab").is_dir():
        sys.exit(f"no mahtab kernelspec in {args.kernels}: run scripts/build-and-install.sh first")
    ksm = KernelSpecManager()
    ksm.kernel_dirs = [str(args.kernels)]
    tasks = chosen_tasks(args)
    env = dict(os.environ)
    replay = local = None
    if args.replay or args.local:
        for name in PROVIDER_VARIABLES:
            env.pop(name, None)
    if args.replay:
        replay = ReplayProvider(tasks)
        env.update(replay.env())
        provider = "replay provider (reference solutions)"
    elif args.local:
        local = LocalServer(args.local, args.server_log, args.prompts)
        env.update(local.env())
        provider = f"local model {args.local} (temperature 0, seed 0; {os.cpu_count()} cores)"
    else:
        provider = describe_provider(env)
    # Every run asks the model: the evaluation measures it, not a record.
    env["MAHTAB_REPLAY"] = "0"
    if args.candidates is not None:
        env["MAHTAB_CANDIDATES"] = str(args.candidates)
        provider += f"; {args.candidates} other solutions a turn"
    if args.cross_checks is not None:
        env["MAHTAB_CROSS_CHECKS"] = str(args.cross_checks)
        provider += f"; {args.cross_checks} cross-checks of a done"
    provider += f"; {len(tasks)} tasks of suite {args.suite}, split {args.split}"
    kernel = kernel_identity(ksm)
    results = resumed(args, kernel, provider) if args.resume else []
    done = {(r.graph, r.task, r.repeat) for r in results}
    try:
        for repeat in range(args.repeat):
            for graph in args.graphs:
                if local and results:
                    # Afresh for each graph: its first call finds nothing cached.
                    local.close()
                    local = LocalServer(args.local, args.server_log, args.prompts)
                    env.update(local.env())
                for task in tasks:
                    if (graph, task.name, repeat) in done:
                        continue
                    result = run_task(ksm, env, graph, task, args.timeout, args.max_turns, args.show)
                    result.repeat = repeat
                    print(progress_line(result, len(results) + 1, len(tasks) * len(args.graphs) * args.repeat,
                                        named=args.split != "held-out"),
                          file=sys.stderr, flush=True)
                    results.append(result)
                    # Kept as it goes: a run stopped early still has its figures.
                    save_json(args.json, provider, kernel, summarize(results, args.graphs), results)
    finally:
        if replay:
            replay.close()
        if local:
            local.close()
    rows = summarize(results, args.graphs)
    print_report(rows, results, provider, named=args.split != "held-out")
    save_json(args.json, provider, kernel, rows, results)
    if args.strict and not all(r.solved for r in results):
        sys.exit(1)


def save_json(path, provider, kernel, rows, results):
    """Every result so far, and the summary of them, in `path` (if given)."""
    if path:
        Path(path).write_text(json.dumps(
            {"provider": provider, "kernel": kernel, "summary": rows, "results": [asdict(r) for r in results]},
            indent=2))


def kernel_identity(ksm):
    """The mahtab binary the kernelspec starts, by its sha256: results from
    another build are not the same measurement."""
    binary = Path(ksm.get_kernel_spec("mahtab").argv[0])
    digest = hashlib.sha256()
    with open(binary, "rb") as f:
        for piece in iter(lambda: f.read(1 << 20), b""):
            digest.update(piece)
    return {"binary": str(binary), "sha256": digest.hexdigest()}


def resumed(args, kernel, provider):
    """The results `args.json` holds, when they came from this kernel binary
    and provider (an exit that says why otherwise)."""
    if not args.json:
        sys.exit("--resume needs --json: the file whose results to keep")
    path = Path(args.json)
    if not path.exists():
        return []
    earlier = json.loads(path.read_text())
    if earlier.get("kernel", {}).get("sha256") != kernel["sha256"]:
        sys.exit(f"{path} holds results of another mahtab binary than {kernel['binary']}: not resumed")
    if earlier.get("provider") != provider:
        sys.exit(f"{path} holds results of another run ({earlier.get('provider')}): not resumed")
    return [Result(**r) for r in earlier["results"]]


def describe_provider(env):
    """Which provider the kernel will use, as far as the environment says
    (the settings file may say more; %ask_config in a notebook shows all)."""
    model = env.get("MAHTAB_MODEL", "its default model")
    if env.get("MAHTAB_PROVIDER"):
        return f"{env['MAHTAB_PROVIDER']} · {model}"
    if env.get("ANTHROPIC_API_KEY"):
        return f"anthropic · {model}"
    if env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
        return f"openai-compatible {re.sub(r'/v1/?$', '', env.get('OPENAI_BASE_URL', 'api.openai.com'))} · {model}"
    return "the configured provider, or the embedded local model"


if __name__ == "__main__":
    main()

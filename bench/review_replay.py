"""Ask the review again, offline, of work recorded in development runs.

A change to the review (its system prompt, its fields, the question its odds
are read from) moves the "done" claims of a run, and a whole development run
of 40 tasks takes over half an hour. This replays the review of recorded work
instead: every answer in the transcripts `agent_eval.py --show` wrote for
the development split (the last turn of the default graph's runs that ended
"done" or "not confirmed", and the single-shot answers that ran without an
error),
each with whether the task's own check passed, is reviewed again by the local
model under the working tree's `prompts/reflect.md`, and the report says how
many the review passed, how many it claimed (passed and weighed at least the
bar), and how many of each were wrong; a run of 40 answers takes about seven
minutes.

The review's message is rebuilt from the transcript (the request, the code,
what it printed, the variables it changed, the values the summary line says
were checked), close to the kernel's (`prompts::review_request`) but not the
same text (a run left "not confirmed" lists no values on its summary line, so
its review here sees none); the verdict's fields are read from the example reply that ends
`reflect.md`. A change that looks better here is a candidate, to be measured
by `agent_eval.py` on both splits before it is kept. Only development runs:
held-out work is never read one by one.

    .venv/bin/python bench/review_replay.py bench/results/dev40-*.json
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import math
import re
import statistics
import sys
import time
import tokenize
import urllib.request
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

import agent_eval  # noqa: E402

DONE_FIELD = "is_complete"
BOOLEAN_FIELDS = {"is_complete", "cannot_fix"}


def rust_constant(file: str, name: str):
    """The value of `const NAME` in `src/agent/<file>`, a string or an
    integer, read from the source so the replay asks what the kernel asks."""
    source = (ROOT / "src" / "agent" / file).read_text()
    found = re.search(rf'const {name}: (?:&str = "((?:[^"\\]|\\.)*)"|u32 = (\d+));', source, re.S)
    if found.group(2) is not None:
        return int(found.group(2))
    escapes = {"n": "\n", '"': '"', "\\": "\\"}
    # A backslash at a line's end continues the string past the next line's indent.
    text = re.sub(r"\\\n\s*", "", found.group(1))
    return re.sub(r"\\(.)", lambda m: escapes[m.group(1)], text)


# The verdict alone, asked after the review passed, and the schema's limits.
VERDICT_ALONE = rust_constant("prompts.rs", "VERDICT_ALONE")
REASONING_CHARS = rust_constant("schemas.rs", "REASONING_CHARS")
ANSWER_CHARS = rust_constant("schemas.rs", "ANSWER_CHARS")


def transcripts(text: str):
    """(graph, task, body) for each run `--show` printed."""
    for block in re.split(r"^--- ", text, flags=re.M)[1:]:
        head, _, body = block.partition("\n")
        found = re.match(r"(\w+) · (\S+)", head)
        if found:
            yield found.group(1), found.group(2), body


def last_turn_work(body: str) -> dict | None:
    """The code, its output, the variables it changed and what was checked,
    of a run's last turn where it wrote one block; None for any other.
    (The review reads the last turn; the earlier blocks it builds on, which
    it reads too, are rare and left out here.)"""
    turns = body.count("[code, turn ")
    marker = f"[code, turn {turns}]\n"
    if turns == 0 or body.count(marker) != 1:
        return None
    code, found, rest = body.split(marker, 1)[1].partition("\n[output]\n")
    if not found:
        return None
    changed = rest.split("[changed]\n", 1)
    output = changed[0]
    # The verdict's line (passed or not confirmed) or the summary line ends what it printed.
    output = re.split(r"\n[✓?] |\n\S+ · (?:checked|not checked|local model)", output)[0]
    changes = []
    if len(changed) > 1:
        for line in changed[1].split("  (%ask_undo")[0].splitlines():
            kind = re.match(r"\s*(added|changed)\s+(.*)", line)
            if kind:
                changes.append(kind.group(2) + (" (new)" if kind.group(1) == "added" else ""))
    # The summary line: "done · checked: <value> · <value> · local model ...".
    checked = re.search(r"^done · checked: (.*?)(?: · local model|$)", body, re.M)
    return {
        "code": python_part(code.strip("\n")),
        "output": output.strip(),
        "changes": changes,
        "checked": checked.group(1).split(" · ") if checked else [],
    }


def python_part(code: str) -> str:
    """The block without the prose an answer went on with after it (the
    panel shows what streamed on): the longest run of its first lines that
    Python reads."""
    lines = code.splitlines()
    for end in range(len(lines), 0, -1):
        try:
            ast.parse("\n".join(lines[:end]))
        except SyntaxError:
            continue
        return "\n".join(lines[:end]).rstrip()
    return code


def without_comments(code: str) -> str:
    """The block without its comments, the lines that held only one, and
    blank lines in a row, as the review reads it (`parse/comments.rs`)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return code
    starts = {t.start[0]: t.start[1] for t in tokens if t.type == tokenize.COMMENT}
    # Lines that begin inside a string spanning lines are its text, kept as written.
    in_string = {n for t in tokens if t.type == tokenize.STRING for n in range(t.start[0] + 1, t.end[0] + 1)}
    lines = []
    for number, line in enumerate(code.splitlines(), 1):
        text = line[: starts[number]].rstrip() if number in starts else line
        if number in in_string:
            lines.append(text)
            continue
        text = text.rstrip()
        if text.strip() or (number not in starts and lines and lines[-1]):
            lines.append(text)
    return "\n".join(lines).strip("\n")


def review_message(request: str, work: dict, with_code: bool = True, with_comments: bool = False) -> str:
    """The review's message, as the kernel words it (`with_code`: the code
    that ran written out, without its comments unless `with_comments`;
    without it, only what the code did)."""
    # Nothing printed is not mentioned, as in the kernel's review.
    output = work["output"] if work["output"] != "(no output)" else ""
    printed = f"It printed:\n{output}\n" if output.strip() else ""
    variables = "\n".join(work["changes"]) or "(none changed)"
    block = work["code"] if with_comments else without_comments(work["code"])
    code = f"Code that ran:\n```python\n{block}\n```\n" if with_code else "The code ran.\n"
    text = (
        f"Request:\n{request.strip()}\n\n{code}"
        f"{printed}\nVariables after it ran:\n{variables}\n"
    )
    if work["checked"]:
        text += "\nThe values the request names, as they are now:\n" + "\n".join(work["checked"]) + "\n"
    return text


def recorded_work(results: list[Path], tasks: dict) -> list[dict]:
    """Each distinct last-turn answer of the runs in `results` (their `--show`
    transcripts beside them, `.err` or `.log`), with whether it was right."""
    seen = {}
    for path in results:
        report = json.loads(path.read_text())
        if "held-out" in report.get("provider", ""):
            sys.exit(f"{path}: a held-out run; its work is not read one by one")
        outcomes = {(r["graph"], r["task"]): r for r in report["results"]}
        shown = [p for p in (path.with_suffix(".err"), path.with_suffix(".log")) if p.is_file()]
        for graph, task, body in transcripts("".join(p.read_text() for p in shown)):
            result = outcomes.get((graph, task))
            if not result or task not in tasks:
                continue
            if graph == "default" and result["outcome"] not in ("Complete", "Unconfirmed"):
                continue
            if graph not in ("default", "single"):
                continue
            work = last_turn_work(body)
            if not work or "Traceback" in work["output"]:
                continue
            seen.setdefault((task, work["code"]), {**work, "task": task, "right": result["solved"],
                                                   "request": tasks[task].prompt})
    return list(seen.values())


def reflect_prompt(path: Path = ROOT / "prompts" / "reflect.md") -> str:
    """`prompts::reflect()`: `reflect.md` (or another prompt at `path`)
    with the answer field's words."""
    words = rust_constant("prompts.rs", "VERDICT_ANSWER_FIELD")
    return path.read_text().replace("{answer_field}", words)


def verdict_schema(system: str) -> dict:
    """The verdict's fields, in the order of the example reply the prompt ends with."""
    example = system[system.rindex("\n{") + 1:]
    fields = re.findall(r'"(\w+)":', example)
    properties = {
        name: {"type": "boolean"} if name in BOOLEAN_FIELDS
        else {"type": "string", "maxLength": ANSWER_CHARS if name == "answer" else REASONING_CHARS}
        for name in fields
    }
    return {"type": "object", "properties": properties, "required": fields, "additionalProperties": False}


def likelihood_done(tokens: list[dict]) -> float | None:
    """P(true) against P(false) at the token after `"is_complete":`
    (`parse::verdict::likelihood_true`)."""
    key, text = f'"{DONE_FIELD}":', ""
    for token in tokens:
        if text.rstrip().endswith(key) and token["token"].strip():
            chances = {}
            for choice in token["top_logprobs"]:
                word = choice["token"].strip()
                chances[word] = chances.get(word, 0.0) + math.exp(choice["logprob"])
            least = min(math.exp(c["logprob"]) for c in token["top_logprobs"])
            yes, no = chances.get("true", least), chances.get("false", least)
            return yes / (yes + no)
        text += token["token"]
    return None


class Judge:
    """The local model server, asked as the kernel asks it (streamed, the
    schema as a grammar, temperature 0, seed 0)."""

    def __init__(self, model: str):
        self.local = agent_eval.LocalServer(model)
        server = json.loads(next(Path(self.local.runtime.name).glob("mahtab-local-model-*.json")).read_text())
        self.url, self.key = server["url"], server["key"]

    def ask(self, system: str, message: str, schema: dict, max_tokens: int, odds: bool = False):
        """The answer's text, its tokens' likeliest choices (with `odds`) and
        its length in tokens."""
        body = {
            "model": "local-model", "stream": True, "temperature": 0, "seed": 0, "max_tokens": max_tokens,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": message}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema}},
        }
        if odds:
            body.update(logprobs=True, top_logprobs=5)
        request = urllib.request.Request(
            self.url + "/v1/chat/completions", data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.key}"},
        )
        text, tokens, pieces = "", [], 0
        with urllib.request.urlopen(request, timeout=600) as response:
            for line in response:
                line = line.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                for choice in json.loads(line[6:]).get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content") or ""
                    text += piece
                    pieces += bool(piece)
                    tokens += (choice.get("logprobs") or {}).get("content") or []
        # (A streamed piece is one token.)
        return text, tokens, pieces

    def close(self):
        self.local.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", type=Path, help="agent_eval.py --json files of development runs")
    parser.add_argument("--bar", type=float, default=80.0, help="the judge's odds a claim needs, percent")
    parser.add_argument("--alone", default=VERDICT_ALONE, help="what asks for the verdict alone")
    parser.add_argument("--local", default="coder-1.5b", choices=sorted(agent_eval.LOCAL_MODELS))
    parser.add_argument("--json", type=Path, help="write each review here")
    parser.add_argument("--system", type=Path, default=ROOT / "prompts" / "reflect.md",
                        help="the review's system prompt (a variant to weigh)")
    parser.add_argument("--without-code", action="store_true",
                        help="leave the code out of the review's message (what it printed and changed stay)")
    parser.add_argument("--with-comments", action="store_true",
                        help="the code with its comments (the kernel's review reads it without them)")
    args = parser.parse_args()
    tasks = {t.name: t for t in agent_eval.TASKS}
    tasks |= {t.name: t for t in agent_eval.public_tasks(agent_eval.DEFAULT_BENCHMARKS)}
    work = recorded_work(args.results, tasks)
    system = reflect_prompt(args.system)
    schema = verdict_schema(system)
    alone = {"type": "object", "properties": {DONE_FIELD: {"type": "boolean"}}, "required": [DONE_FIELD],
             "additionalProperties": False}
    judge = Judge(args.local)
    reviews = []
    try:
        for item in work:
            message = review_message(item["request"], item, with_code=not args.without_code,
                                     with_comments=args.with_comments)
            started = time.monotonic()
            text, _, written = judge.ask(system, message, schema, 1024)
            seconds = time.monotonic() - started
            try:
                verdict = json.loads(text)
            except json.JSONDecodeError:
                verdict = {}
            passed = verdict.get(DONE_FIELD) is True
            odds = None
            if passed:
                _, tokens, _ = judge.ask(system, message + args.alone, alone, 16, odds=True)
                odds = likelihood_done(tokens)
            claimed = passed and odds is not None and odds * 100 >= args.bar
            reviews.append({"task": item["task"], "right": item["right"], "passed": passed, "odds": odds,
                            "claimed": claimed, "verdict": verdict, "tokens": written, "seconds": seconds})
            print(f"  {item['task']:<24} {'right' if item['right'] else 'wrong'}  "
                  f"{'passed' if passed else 'sent back'}  {'' if odds is None else f'{odds:.0%}'}",
                  file=sys.stderr, flush=True)
    finally:
        judge.close()
    if args.json:
        args.json.write_text(json.dumps(reviews, indent=1))
    right = sum(r["right"] for r in reviews)
    passed = [r for r in reviews if r["passed"]]
    claimed = [r for r in reviews if r["claimed"]]
    print(f"{len(reviews)} answers ({right} right): the review passed {len(passed)} "
          f"({sum(not r['right'] for r in passed)} wrong); claimed at {args.bar:g}%: {len(claimed)} "
          f"({sum(not r['right'] for r in claimed)} wrong); right answers not claimed: "
          f"{sum(r['right'] and not r['claimed'] for r in reviews)}; the review wrote "
          f"{statistics.mean(r['tokens'] for r in reviews):.0f} tokens on average, in "
          f"{statistics.median(r['seconds'] for r in reviews):.1f} s (median)")


if __name__ == "__main__":
    main()

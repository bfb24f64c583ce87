"""bench/review_replay.py reads the work a development run showed back into
the review's message, and the verdict's fields and odds as the kernel reads
them; the model's side needs the local model and is a report, not a test."""

import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
import review_replay  # noqa: E402

SHOWN = """\
--- default · total_task

Here is the code.

[code, turn 1]
# The total quantity, as asked
total = sales['qty'].sum()  # '#' in a string stays: '#'
[output]
(no output)
✓ The total is computed.
The total is 11.
[changed]
  added    total: int64 shape () dtype int64 = np.int64(11)
  changed  n: int = 1 -> int = 2
  (%ask_undo puts it back)
done · checked: total = 11 (int64) · n = 2 (int) · local model Qwen (shared server) · 1 turn · 14.5 s
{"turns": 1}
---
  default  total_task     14.5s  solved
--- single · mean_task

[code, turn 1]
m = df['a'].mean()
print(m)
This prints the mean of column a.
[output]
2.5
? The mean is computed. (not confirmed: the review was 60% sure)
[changed]
  added    m: float = 2.5
answered · local model Qwen · 1 turn · 3.1 s
---
--- default · looped_task

[code, turn 1]
x = 1
[output]
(no output)
[code, turn 2]
x = 2
[output]
(no output)
done · checked: x = 2 (int) · local model Qwen · 2 turns · 9.0 s
---
--- single · failed_task

[code, turn 1]
y = undefined
[output]
Traceback (most recent call last):
NameError: name 'undefined' is not defined
answered · local model Qwen · 1 turn · 2.0 s
---
"""


def write_run(tmp_path, split="dev"):
    results = [
        {"graph": "default", "task": "total_task", "outcome": "Complete", "solved": True},
        {"graph": "single", "task": "mean_task", "outcome": "", "solved": False},
        {"graph": "default", "task": "looped_task", "outcome": "Complete", "solved": True},
        {"graph": "single", "task": "failed_task", "outcome": "", "solved": False},
    ]
    report = tmp_path / "run.json"
    report.write_text(json.dumps({"provider": f"local model; 4 tasks of suite own, split {split}",
                                  "results": results}))
    report.with_suffix(".err").write_text(SHOWN)
    return report


TASKS = {name: SimpleNamespace(prompt=f"the request of {name}")
         for name in ("total_task", "mean_task", "looped_task", "failed_task")}


def test_the_last_turns_work_is_read_back_with_what_was_checked(tmp_path):
    work = {w["task"]: w for w in review_replay.recorded_work([write_run(tmp_path)], TASKS)}
    # A block that failed is not an answer to review again; of two turns, the last is.
    assert sorted(work) == ["looped_task", "mean_task", "total_task"]
    assert work["looped_task"]["code"] == "x = 2" and work["looped_task"]["checked"] == ["x = 2 (int)"]
    total = work["total_task"]
    assert total["right"] is True
    assert total["code"] == "# The total quantity, as asked\ntotal = sales['qty'].sum()  # '#' in a string stays: '#'"
    assert total["output"] == "(no output)"
    assert total["changes"] == ["total: int64 shape () dtype int64 = np.int64(11) (new)",
                                "n: int = 1 -> int = 2"]
    assert total["checked"] == ["total = 11 (int64)", "n = 2 (int)"]
    single = work["mean_task"]
    # The prose after the block and the verdict's line after the output are not the work.
    assert single["code"] == "m = df['a'].mean()\nprint(m)"
    assert single["right"] is False and single["output"] == "2.5" and single["checked"] == []
    message = review_replay.review_message(total["request"], total)
    assert message.startswith("Request:\nthe request of total_task\n\nCode that ran:\n```python\n"
                              "total = sales['qty'].sum()\n```\n")
    # The kernel's review reads the code without its comments; the replay can read them.
    with_comments = review_replay.review_message(total["request"], total, with_comments=True)
    assert "# The total quantity, as asked\n" in with_comments
    # Nothing printed is not mentioned: the variables follow the code.
    assert "It printed" not in message and "total = sales['qty'].sum()\n```\n\nVariables after it ran:\n" in message
    assert message.endswith("as they are now:\ntotal = 11 (int64)\nn = 2 (int)\n")
    assert "as they are now" not in review_replay.review_message(single["request"], single)
    # Without the code: what it printed and changed, and the values, stay.
    bare = review_replay.review_message(total["request"], total, with_code=False)
    assert "sales['qty']" not in bare and bare.startswith("Request:\nthe request of total_task\n\nThe code ran.\n")
    assert bare.endswith(message[message.index("\nVariables after it ran:"):])
    assert "It printed:\n2.5\n\nVariables after it ran:" in review_replay.review_message(single["request"], single)


def test_held_out_work_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="held-out"):
        review_replay.recorded_work([write_run(tmp_path, split="held-out")], TASKS)


def test_the_verdict_is_asked_in_the_prompts_own_fields():
    system = review_replay.reflect_prompt()
    assert "{answer_field}" not in system and "never invented" in system
    schema = review_replay.verdict_schema(system)
    assert schema["required"] == ["reasoning", "is_complete", "cannot_fix", "next_action", "answer"]
    assert schema["properties"]["is_complete"] == {"type": "boolean"}
    assert schema["properties"]["answer"]["maxLength"] > schema["properties"]["reasoning"]["maxLength"]
    # The kernel's own words for the verdict alone, escapes and all.
    assert review_replay.VERDICT_ALONE == '\n\nYour verdict alone, as JSON: {"is_complete": true or false}'


def choice(token, p):
    return {"token": token, "logprob": math.log(p)}


def test_the_odds_of_done_add_up_every_spelling_of_true_and_false():
    tokens = [{"token": t, "top_logprobs": [choice(t, 0.9)]} for t in ['{"', "is", "_complete", '":']]
    tokens.append({"token": " true", "top_logprobs": [choice(" true", 0.5), choice(" false", 0.2),
                                                      choice("true", 0.1), choice(" \"", 0.01)]})
    assert review_replay.likelihood_done(tokens) == pytest.approx(0.6 / 0.8)
    assert review_replay.likelihood_done(tokens[:4]) is None

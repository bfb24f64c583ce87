"""Agent code past its time limit is stopped with an error the model reads,
the namespace keeps what the code did before, and nothing of the limit
reaches the code that runs next."""

import time

from mahtab.agent import execution

from agent_runtime import Runtime


def test_a_loop_that_never_ends_is_stopped_at_its_time_limit():
    namespace = {"steps": 0}
    started = time.monotonic()
    # `except Exception` in the loop does not keep it going.
    code = "while True:\n    try:\n        steps += 1\n    except Exception:\n        pass\n"
    result = execution.run_agent_code(Runtime(), code, namespace, seconds=0.5)
    assert time.monotonic() - started < 10
    assert result["failed"]
    assert result["error"].splitlines()[-1].startswith(
        "BlockTimedOut: the block ran longer than 0.5 s and was stopped"
    ), result["error"]
    assert namespace["steps"] > 0
    # The next block runs as ever, past the time the first was given.
    after = execution.run_agent_code(Runtime(), "import time\ntime.sleep(0.8)\ndone = steps", namespace, seconds=5)
    assert not after["failed"], after["error"]
    assert namespace["done"] == namespace["steps"]


def test_a_block_that_ends_in_time_is_not_touched_by_its_limit():
    namespace = {}
    result = execution.run_agent_code(Runtime(), "total = sum(range(10))\ntotal", namespace, seconds=30)
    assert not result["failed"]
    assert namespace["total"] == 45
    # The limit's timer is gone with the block: nothing lands later.
    time.sleep(0.2)
    assert execution.run_agent_code(Runtime(), "x = 1", namespace)["failed"] is False

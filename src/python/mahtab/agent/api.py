"""The agent as Python code reaches it: ``ask()`` and ``rlm()`` (builtins
from the first cell), ``%%ask`` cells, the errors a run raises and the
answer ``ask()`` returns.

This module is light and loads with the runtime; what a run needs (the
agent's scope, running its code, the namespace summary, the toolbox) loads
on the first run.
"""

import builtins
import json
import re
import sys
from collections import deque

from mahtab.runtime.messages import dumps
from mahtab.runtime.reprs import clip_middle


class AskError(Exception):
    """An ``%%ask`` cell or ``ask()`` call failed (the model provider, the
    settings or the request); the message says why."""

    def _render_traceback_(self):
        # What went wrong is the message; the frames are the kernel's own.
        return ["%s: %s" % (type(self).__name__, self)]


class AskConfigError(AskError):
    """No usable provider, or a settings file that cannot be read."""


class AskProviderError(AskError):
    """The provider could not be set up."""


class UsageError(AskError):
    """Options the magic or ``ask()`` does not take."""


def _agent_error(name):
    """The class of this module the kernel names for a failed request
    (its ``AskFailure``); ``AskError`` for a name it does not know."""
    cls = globals().get(name)
    return cls if isinstance(cls, type) and issubclass(cls, AskError) else AskError


# How deep rlm() calls may nest unless told otherwise.
RLM_MAX_DEPTH = 3

RECENT_CELLS = 10
RECENT_CELL_CHARS = 2000

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def is_agent_cell(code):
    """Whether the agent serves ``code``: an ``%%ask`` cell or an
    ``%ask_config``, ``%ask_graph``, ``%ask_code`` or ``%ask_undo`` line (the rule of the
    kernel's own parser)."""
    magics = ("%%ask", "%ask_config", "%ask_graph", "%ask_code", "%ask_undo")
    return any(_magic_args(code, magic) is not None for magic in magics)


def undo_args(code):
    """The arguments of an ``%ask_undo`` cell, or None for another cell;
    UsageError when more lines follow it."""
    args = _magic_args(code, "%ask_undo")
    if args is not None and code.strip().count("\n"):
        raise UsageError("%ask_undo goes in a cell of its own\nusage: %ask_undo [N]")
    return args


def _magic_args(code, magic):
    first = code.lstrip("\r\n").split("\n", 1)[0].rstrip()
    rest = first[len(magic) :]
    if first.startswith(magic) and (not rest or rest[0].isspace()):
        return rest.strip()
    return None


class AskAnswer(str):
    """What ``ask()`` returns: the model's final answer, as a str, with the
    run's trace (``.trace``: its steps, turns, tokens and seconds) and what
    it did: ``.outcome`` (how it ended: "Complete", "Unconfirmed" (its
    check passed, but the judge was unsure of it), "Answered", "GaveUp",
    ...), ``.plan`` (the analyst's plan, a dict, else None), ``.code`` (each
    block that ran), ``.output`` (what the last block that worked printed,
    or None), ``.figures`` (how many figures and other rich outputs were
    shown), ``.changes`` (a line per variable the code changed) and
    ``.failed_attempts`` (dicts with the ``code`` and its ``error``)."""

    def __new__(cls, answer, trace=None, result=None):
        text = super().__new__(cls, answer)
        text.trace = trace
        result = result or {}
        text.outcome = result.get("outcome")
        text.plan = result.get("plan")
        text.code = result.get("code", [])
        text.output = result.get("output")
        text.figures = result.get("figures", 0)
        text.changes = result.get("changes", [])
        text.failed_attempts = result.get("failed_attempts", [])
        return text


class AgentApi:
    """The agent's entry points on a runtime: mixed in before a runtime class
    of ``mahtab.runtime`` (``mahtab.runtimes``), it takes that runtime's
    hooks for cells that are the agent's and for the cells it keeps for the
    next request, and runs agent code through the runtime's own (``_as_python``,
    ``_run_coroutine``, ``_after_code``). Needs the runtime's ``bridge`` and
    ``user_ns``."""

    def __init__(self, bridge):
        self._start_agent_api()
        super().__init__(bridge)

    def _start_agent_api(self):
        self._recent_cells = deque(maxlen=RECENT_CELLS)
        # The user's last failed cell, for "explain the last error".
        self.last_failure = None
        self._agent_runs = 0  # agent runs under way on this thread, nested
        self._undo_history = None
        # ask() and rlm() are at hand in every cell, like display(), and importable.
        builtins.ask = self.ask
        builtins.rlm = self.rlm
        package = sys.modules[__name__.partition(".")[0]]
        package.ask = self.ask
        package.rlm = self.rlm
        package.AskError = AskError

    def ask(
        self,
        prompt,
        *,
        model=None,
        provider=None,
        judge_model=None,
        max_turns=None,
        block_seconds=None,
        graph=None,
        no_exec=False,
        once=False,
        confirm=False,
        approve=None,
        new=False,
        allow=None,
        trace=False,
        informer=False,
        on_token=None,
        on_code_block=None,
        on_execution=None,
    ):
        """Asks the agent, as an ``%%ask`` cell does, from Python code: the run
        streams into the running cell, its code runs in this namespace, and
        the model's final answer (without its code) is returned, a str whose
        ``.trace`` tells the nodes the run went through, with their time,
        turns and tokens (``trace=True`` also shows it in the cell).
        ``approve`` ("always", "risky" or "never") says when the agent's code
        asks first, as ``%%ask --approve`` does; ``block_seconds``, how long
        one block of its code may run before it is stopped. ``on_token``,
        ``on_code_block`` and ``on_execution`` are called as the run goes
        (see AskCallbacks)."""
        __tracebackhide__ = True
        from mahtab.agent.scope import AgentScope, AskCallbacks  # loaded on the first run

        callbacks = AskCallbacks(on_token, on_code_block, on_execution)
        options = {
            "model": model,
            "provider": provider,
            "judge_model": judge_model,
            "max_turns": max_turns,
            "block_seconds": block_seconds,
            "graph": graph,
            "no_exec": no_exec,
            "once": once,
            "confirm": confirm,
            "approve": approve,
            "new": new,
            "allow": allow,
            "trace": trace,
            "informer": informer,
            "on_token": callbacks.wants_tokens,
        }
        request = {"kind": "ask", "prompt": str(prompt), "options": options}
        scope = AgentScope(self, self.user_ns, callbacks, self.undo_history().journal())
        result = self._agent_request(request, scope)
        return AskAnswer(result["answer"], result.get("trace"), result.get("result"))

    def rlm(self, query, context, *, max_turns=None, max_depth=RLM_MAX_DEPTH, model=None, provider=None, _depth=0):
        """Asks a sub-agent ``query`` about ``context``: it sees only a
        description of the value, explores it with code (peek, grep,
        partition, and rlm() on parts, at most ``max_depth`` levels deep) in
        a namespace of its own, and ends by calling ``FINAL(answer)``; that
        answer is returned (None if it found none within its turns)."""
        __tracebackhide__ = True
        if _depth >= max_depth:
            raise AskError(
                "rlm(): the depth limit (%d) is reached; explore this part with peek, grep and partition" % max_depth
            )
        from mahtab.agent.scope import AgentScope, describe_value, rlm_namespace  # loaded on the first run

        def nested(query, context, **kwargs):
            kwargs.setdefault("max_depth", max_depth)
            return self.rlm(query, context, _depth=_depth + 1, **kwargs)

        namespace, found = rlm_namespace(context, nested)
        request = {
            "kind": "rlm",
            "query": str(query),
            "description": describe_value(context),
            "depth_left": max_depth - _depth - 1,
            "options": {"max_turns": max_turns, "model": model, "provider": provider},
        }
        self._agent_request(request, AgentScope(self, namespace))
        return found.get("answer")

    def ask_cell(self, code):
        """Runs an ``%%ask`` cell or an ``%ask_config`` line. An interrupted
        run ends the cell with KeyboardInterrupt shown as one line, its
        summary, not a traceback into the kernel's own code."""
        __tracebackhide__ = True
        try:
            result = self._agent_request({"kind": "cell", "code": code, "cell_id": self.bridge.cell_id()})
        except KeyboardInterrupt:
            what = "%%ask" if code.startswith("%%ask") else code.split(None, 1)[0]
            stopped = KeyboardInterrupt("the %s run was interrupted" % what)
            stopped._render_traceback_ = lambda: ["\x1b[31mKeyboardInterrupt: %s\x1b[39m" % stopped]
            raise stopped from None
        # %ask_code: the frontend puts this text in a new cell below.
        if result.get("next_input") is not None:
            self.set_next_input(result["next_input"])

    def _agent_request(self, request, scope=None):
        __tracebackhide__ = True
        if scope is None:
            from mahtab.agent.scope import AgentScope  # loaded on the first run

            scope = AgentScope(self, self.user_ns, journal=self.undo_history().journal())
        # A run started from inside another run's code shows indented.
        request["indent"] = self._agent_runs
        self._agent_runs += 1
        try:
            result = json.loads(self.bridge.ask(dumps(request), scope))
        finally:
            self._agent_runs -= 1
            # A run that failed or was stopped can be undone too.
            if scope.journal is not None:
                scope.journal.finish(scope.namespace)
        error = result.get("error")
        if error is not None:
            if error["ename"] == "KeyboardInterrupt":
                raise KeyboardInterrupt(error["evalue"])
            raise _agent_error(error["ename"])(error["evalue"]) from None
        return result

    def undo_history(self):
        """The agent runs ``%ask_undo`` can undo (made on first use)."""
        if self._undo_history is None:
            from mahtab.agent.undo import UndoHistory

            self._undo_history = UndoHistory()
        return self._undo_history

    def ask_undo(self, line=""):
        """``%ask_undo [N]``: puts back what the last N agent runs changed in
        the namespace and the files their tools wrote, except what the user's
        own code changed since."""
        from mahtab.agent.undo import parse_count

        try:
            count = parse_count(line)
        except ValueError as error:
            raise UsageError(str(error)) from None
        print(self.undo_history().undo(self.user_ns, count))

    def note_cell(self, code, store_history, reply=None):
        """Remembers a cell the user ran, and whether it failed, for the
        agent's next request."""
        if store_history and not is_agent_cell(code):
            self._recent_cells.append(code[:RECENT_CELL_CHARS])
            if reply is not None and reply.get("status") == "error":
                traceback_text = _ANSI.sub("", "\n".join(reply.get("traceback") or ()))
                self.last_failure = "%s\n\n%s" % (code[:RECENT_CELL_CHARS], clip_middle(traceback_text, 4000))

    def take_recent_cells(self):
        """The cells run since the last request (and forgets them)."""
        cells = list(self._recent_cells)
        self._recent_cells.clear()
        return cells

    # -- the runtime's hooks it takes (mahtab.runtime.base) ---------------------

    def _serve_special_cell(self, code):
        """In plain Python: ``%%ask`` cells and the agent's line magics,
        read by their text (the IPython runtime has them as magics)."""
        undo = undo_args(code)
        if undo is not None:
            self.ask_undo(undo)
            return True
        if is_agent_cell(code):
            self.bridge.user_code_starting()
            self.ask_cell(code)
            return True
        return False

    def _add_magics(self, shell):
        from mahtab.agent import magics

        magics.register(self, shell)

"""What an agent run may do in Python: the methods the kernel's agent calls
on the thread that asked for the run (run code, stream a token, read the
namespace, ask the user), the callbacks of an ``ask()`` caller, and the
namespace an ``rlm()`` sub-agent explores its value in.

Loaded with the agent, on its first run.
"""

import builtins
import functools
import json
import os
import re
import traceback

from mahtab import tools
from mahtab.agent import candidates, request_example, shown_result, written_difference
from mahtab.agent.undo import ABSENT, NOT_KEPT
from mahtab.agent.execution import FinalAnswer, run_agent_code
from mahtab.agent.context import conversation_key, interpolate, local_model, notebook_path, repair, skills_named
from mahtab.runtime.messages import dumps
from mahtab.agent.namespace import is_user_variable, namespace_summary
from mahtab.runtime.paths import jupyter_data_dir

# How many variables the informer describes at most, and how many of the
# newest tables and arrays when the request names none.
INFORMER_MAX_VARIABLES = 6
INFORMER_DEFAULT_VARIABLES = 3


class AskCallbacks:
    """What an ``ask()`` caller wants to hear as the run goes, called on the
    caller's thread: ``on_token(text)`` with each piece of the answers as they
    stream, ``on_code_block(code, index)`` before each block of the model's
    code runs, ``on_execution(output, error, index)`` after it (``error`` is
    the traceback's text when the block failed, else None). An exception in
    a callback is shown in the cell and the run goes on."""

    def __init__(self, on_token=None, on_code_block=None, on_execution=None):
        self.on_token = on_token
        self.on_code_block = on_code_block
        self.on_execution = on_execution
        self.blocks = 0

    @property
    def wants_tokens(self):
        return self.on_token is not None

    def token(self, text):
        self._call(self.on_token, text)

    def code_block(self, code):
        index, self.blocks = self.blocks, self.blocks + 1
        self._call(self.on_code_block, code, index)
        return index

    def executed(self, result, index):
        output, error = result["shown"], result.get("error")
        if error and output.endswith(error):
            output = output[: -len(error)]
        self._call(self.on_execution, output, error, index)

    @staticmethod
    def _call(callback, *args):
        if callback is None:
            return
        try:
            callback(*args)
        except Exception:
            traceback.print_exc()


class AgentScope:
    """What an agent run may do in Python. The kernel's agent calls these
    methods on the thread that asked for the run (JSON text in and out)."""

    def __init__(self, runtime, namespace, callbacks=None, journal=None):
        self.runtime = runtime
        self.namespace = namespace
        self.callbacks = callbacks or AskCallbacks()
        # What the run's code changes, for its "changed" panel and for
        # %ask_undo (None: not kept, as for an rlm() search's own namespace).
        self.journal = journal
        # What the run's code rebound, as it was before: a request to
        # change a value itself may need its original object back.
        self.originals = {}
        # The scratch namespaces of the other solutions tried for the turn
        # (None for one not tried or failed), until they are compared.
        self.candidates = []

    def run_code(self, args, output=None):
        request = json.loads(args)
        index = self.callbacks.code_block(request["code"])
        result = run_agent_code(
            self.runtime,
            request["code"],
            self.namespace,
            bool(request.get("confirm")),
            request.get("allow") or (),
            output,
            self.originals,
            self.journal,
            request.get("seconds"),
        )
        self.callbacks.executed(result, index)
        return dumps(result)

    def try_candidates(self, args):
        """Runs each of ``codes`` on a scratch copy of the namespace (before
        the turn's own code, ``own``, runs; with ``before_run``, of the
        namespace as it was before the run, its own code having run) and
        keeps what it computed; for each, ``"ran"``, ``{"not_tried": why}``
        or ``{"raised": {"error": what, "code": the code that raised it}}``
        (the code as known fixes left it)."""
        request = json.loads(args)
        self.candidates, outcomes = [], []
        # Solutions of a request that draws at random differ, right or not.
        random = candidates.draws_at_random(self.runtime, request.get("own", ""))
        start = self.namespace
        if request.get("before_run") and self.journal is not None:
            start = self.journal.namespace_before(self.namespace)
        for code in request.get("codes", ()):
            if random:
                scratch, why = None, candidates.NOT_TRIED + "the turn's own code draws at random"
            else:
                scratch, why, code = candidates.try_candidate_fixed(self.runtime, code, start)
            self.candidates.append(scratch)
            if why is None:
                outcomes.append("ran")
            elif why.startswith(candidates.NOT_TRIED):
                outcomes.append({"not_tried": why[len(candidates.NOT_TRIED):]})
            else:
                outcomes.append({"raised": {"error": why, "code": code}})
        return dumps({"outcomes": outcomes})

    def compare_candidates(self, args):
        """The solutions (0: the namespace, as the turn's code left it; then
        each candidate tried) in groups that computed the same value under
        every name they all computed, largest first, and each solution's
        values in brief."""
        solutions, self.candidates = [self.namespace, *self.candidates], []
        names = candidates.shared_names(solutions, json.loads(args).get("names") or [])
        found = candidates.groups(solutions, names)
        values = [
            "" if solution is None else "\n".join(
                "%s: %s" % (name, candidates.brief(solution[name])) for name in names if name in solution
            )
            for solution in solutions
        ]
        described = [
            [] if solution is None else [
                [name, tools.describe(solution[name], name)] for name in names if name in solution
            ]
            for solution in solutions
        ]
        return dumps({"groups": found, "values": values, "described": described})

    def token(self, args):
        self.callbacks.token(json.loads(args)["text"])
        return "{}"

    def skills(self, args):
        installed = tools.skills()
        request = json.loads(args).get("request", "")
        named = [[name, tools.skill(name)] for name in skills_named(request, installed)]
        return dumps({"skills": installed, "named": named})

    def namespace_summary(self, args):
        return dumps({"summary": namespace_summary(self.namespace)})

    def describe(self, args):
        """The informer's findings: each variable asked about (or, with no
        names, each the request mentions; failing that, the newest tables
        and arrays), described in detail."""
        request = json.loads(args)
        names = [name for name in request.get("names") or () if is_user_variable(self.namespace, name)]
        if not request.get("names"):
            mentioned = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", request.get("request", ""))
            names = [name for name in dict.fromkeys(mentioned) if is_user_variable(self.namespace, name)]
            if not names:
                data = [name for name in self.namespace if is_user_variable(self.namespace, name) and hasattr(self.namespace[name], "shape")]
                names = data[-INFORMER_DEFAULT_VARIABLES:]
        described = [[name, tools.describe(self.namespace[name], name)] for name in names[:INFORMER_MAX_VARIABLES]]
        return dumps({"described": described})

    def written_results(self, args):
        """Each value the request names beside the result the request writes
        out for the data the run's code read (see ``shown_result``) or, where
        the request shows other data, for its example, the run's code tried
        on it (``request_example``: then the value compared is what the code
        made from the example)."""
        request = json.loads(args)
        text, codes = request.get("request", ""), request.get("codes", ())
        inputs = self._inputs_before(codes)
        results = []
        for name in request.get("names", ()):
            if inputs is None or not is_user_variable(self.namespace, name):
                continue
            found = request_example.written_verdict(self.runtime, text, codes, self.namespace, inputs, name)
            if found is None:
                continue
            if found.verdict == "matches":
                results.append({"verdict": "matches", "name": name, "on_example": found.on_example})
            else:
                value = found.value if found.on_example else self.namespace[name]
                results.append({
                    "verdict": "differs", "name": name, "on_example": found.on_example,
                    "written": shown_result.cut(found.written), "value": shown_result.printed(value),
                    "differs_in": written_difference.difference(found.written, value, name),
                })
        return dumps({"results": results})

    def _inputs_before(self, codes):
        """The values the codes read that were there before the run, as they
        were then, by name; None when one of them was not kept (nothing can
        be said of data that is gone)."""
        if self.journal is None:
            return None
        inputs = {}
        for name in request_example.names_read(codes):
            value = self.journal.value_before(name, self.namespace)
            if value is NOT_KEPT:
                return None
            if value is not ABSENT and is_user_variable({name: value}, name):
                inputs[name] = value
        return inputs

    def missing(self, args):
        """Which of the variables and files a request names do not exist."""
        request = json.loads(args)
        return dumps({
            "names": [name for name in request.get("names", ()) if name not in self.namespace],
            "files": [path for path in request.get("files", ()) if not os.path.exists(path)],
        })

    def restore(self, args):
        """Puts the objects the run's code rebound these names away from back
        under them (with ``if_changed``, only where the name now holds other
        data: not a list typed in again as the array of it); the names it
        put back."""
        request = json.loads(args)
        only_changed = bool(request.get("if_changed"))
        restored = []
        for name in request.get("names", ()):
            if name not in self.originals:
                continue
            if only_changed and name in self.namespace and candidates.same_value(self.originals[name], self.namespace[name]):
                continue
            self.namespace[name] = self.originals.pop(name)
            restored.append(name)
        return dumps({"names": restored})

    def changes(self, args):
        """What the run changed (names added, changed and removed, files
        written), for its "changed" panel; the run can be undone from now on."""
        if self.journal is None:
            return dumps({})
        return dumps(self.journal.finish(self.namespace))

    def triage_context(self, args):
        names = [name for name in self.namespace if is_user_variable(self.namespace, name)]
        return dumps({"variables": names, "last_error": self.runtime.last_failure})

    def repair(self, args):
        request = json.loads(args)
        return dumps({"repair": repair(request.get("code", ""), request.get("error", ""), self.namespace)})

    def recent_cells(self, args):
        return dumps({"cells": self.runtime.take_recent_cells()})

    def interpolate(self, args):
        return dumps({"prompt": interpolate(json.loads(args).get("prompt", ""), self.namespace)})

    def local_model(self, args):
        request = json.loads(args)
        return dumps(local_model(request["file"], request.get("package")))

    def memory(self, args):
        folder = os.path.join(jupyter_data_dir(), "mahtab", "conversations")
        return dumps({"dir": folder, "key": str(conversation_key(self.namespace))})

    def notebook(self, args):
        """Which notebook runs (for its %%ask record), and where."""
        return dumps({"notebook": notebook_path(self.namespace), "working_dir": os.getcwd()})

    def input(self, args):
        request = json.loads(args)
        return dumps({"value": self.runtime.bridge.input(str(request.get("prompt", "")), bool(request.get("password")))})


def tools_on(context, tools):
    """peek, grep and partition for an ``rlm()`` search: called without the
    text (``grep("ERROR")``, ``partition(4)``, ``peek()``, ``peek(500)``) they
    look at the searched value, as a model that was told its data is in
    ``context`` often writes; with the text given they work as ever."""

    def bound(tool, argument):
        # `argument` is the one the call must still give besides the text.
        @functools.wraps(tool)
        def call(*args, **kwargs):
            if "text" not in kwargs and len(args) + (argument in kwargs) == 1:
                args = (context,) + args
            return tool(*args, **kwargs)

        return call

    @functools.wraps(tools.peek)
    def peek(*args, **kwargs):
        if "text" not in kwargs and not args:
            args = (context,)
        elif len(args) == 1 and type(args[0]) is int and "n" not in kwargs:
            args = (context, args[0])
        return tools.peek(*args, **kwargs)

    return {"peek": peek, "grep": bound(tools.grep, "pattern"), "partition": bound(tools.partition, "n")}


def describe_value(value, shown=500):
    """What an rlm() sub-agent is told of the value it explores: its type,
    its size and how it begins."""
    try:
        size = len(value)
    except TypeError:
        size = None
    unit = "characters" if isinstance(value, (str, bytes)) else "items"
    size_text = ", %s %s" % (format(size, ","), unit) if size is not None else ""
    return "%s%s; it begins:\n%s" % (type(value).__name__, size_text, tools.peek(value, shown))


# What an rlm() sub-agent's code may use. It reads and computes over one
# value, so it gets Python's builtins that only compute, and may import only
# modules that only compute: nothing that opens files, starts processes or
# reaches the network (the seed's "limited builtins"; a guard on what the
# code names, not a sandbox).
RLM_BUILTINS = frozenset((
    "abs", "all", "any", "ascii", "bin", "bool", "bytes", "callable", "chr", "dict", "divmod", "enumerate",
    "filter", "float", "format", "frozenset", "hasattr", "hash", "hex", "int", "isinstance", "issubclass", "iter",
    "len", "list", "map", "max", "min", "next", "oct", "ord", "pow", "print", "range", "repr", "reversed", "round",
    "set", "slice", "sorted", "str", "sum", "tuple", "type", "zip", "True", "False", "None", "Exception",
    "ArithmeticError", "AssertionError", "AttributeError", "IndexError", "KeyError", "LookupError", "NameError",
    "RuntimeError", "StopIteration", "TypeError", "ValueError", "ZeroDivisionError",
))  # fmt: skip
RLM_MODULES = frozenset((
    "bisect", "collections", "datetime", "difflib", "fnmatch", "functools", "heapq", "itertools", "json", "math",
    "operator", "re", "statistics", "string", "textwrap", "unicodedata",
))  # fmt: skip


def _rlm_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level or name.partition(".")[0] not in RLM_MODULES:
        raise ImportError("rlm() code may import only %s, not %s" % (", ".join(sorted(RLM_MODULES)), name))
    return builtins.__import__(name, globals, locals, fromlist, level)


def rlm_builtins():
    """The builtins of an rlm() sub-agent's code."""
    allowed = {name: getattr(builtins, name) for name in RLM_BUILTINS}
    allowed["__import__"] = _rlm_import
    allowed["__build_class__"] = builtins.__build_class__
    return allowed


def rlm_namespace(context, nested_rlm):
    """The namespace an ``rlm()`` sub-agent's code runs in (the value as
    ``context``, the search tools bound to it, ``FINAL`` and ``rlm`` for a
    nested search), and the dict ``FINAL(answer)`` puts its answer in."""
    found = {}

    def FINAL(answer):
        found["answer"] = answer
        raise FinalAnswer()

    namespace = {"__name__": "__rlm__", "__builtins__": rlm_builtins(), "context": context, "FINAL": FINAL,
                 "rlm": nested_rlm}
    namespace.update(tools_on(context, tools))
    return namespace, found

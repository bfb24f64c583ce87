"""mahtab's Python side: ask() and the agent's tools.

The kernel embeds this package and loads it on its interpreter thread; with
``src/python`` on ``sys.path`` it imports from the source tree too (the unit
tests do). ``ask``, ``rlm`` and ``AskError`` are set here when the runtime
starts; ``mahtab.tools`` (``from mahtab.tools import grep``) loads on first
use.

Two folders, imports pointing one way:

- ``runtime``: cells, output and the requests the kernel hands to Python;
- ``agent``: ``ask()``, ``rlm()``, ``%%ask`` and what a run needs; it builds
  on the runtime, which imports nothing of it;

and at the top, ``runtimes`` (the runtime classes the kernel starts, the
agent mixed in), ``tools`` (the agent's toolbox, public as
``mahtab.tools``) and ``declared`` (names the Rust side reads too).
"""


def __getattr__(name):
    # `import mahtab; mahtab.tools.grep(...)`: the toolbox loads on first use.
    if name == "tools":
        import importlib

        return importlib.import_module(__name__ + ".tools")
    raise AttributeError("module %r has no attribute %r" % (__name__, name))

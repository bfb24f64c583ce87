"""mahtab's Python side: ask() and the agent's tools.

The kernel embeds this package and loads it on its interpreter thread; with
``src/python`` on ``sys.path`` it imports from the source tree too (the unit
tests do). ``ask``, ``rlm`` and ``AskError`` are set here when the runtime
starts; ``mahtab.tools`` (``from mahtab.tools import grep``) loads on first
use.

Modules, each with one job:

- ``runtime``: what both runtimes share; ``plain_runtime`` (plain Python) and
  ``ipython_runtime`` with ``ipython_shell`` (IPython) build on it;
- ``streams``, ``event_loop``, ``display``, ``messages``: output, the cells'
  asyncio loop, rich output, JSON for the bridge;
- ``protocol``, ``completion``, ``introspection``, ``comms``, ``debugger``:
  the requests the kernel hands to Python;
- ``agent_api``: ``ask()``, ``rlm()`` and ``%%ask`` cells; on the first run
  they load ``agent_scope``, ``agent_code`` (with ``close_names``: "Did
  you mean" for a missing key), ``namespace``, ``context``, ``tools``,
  ``guard`` and ``undo`` (what runs changed, ``%ask_undo``);
- ``reprs``, ``paths``, ``import_hooks``: bounded reprs, the Jupyter data
  directory, patching a module when it is first imported.
"""


def __getattr__(name):
    # `import mahtab; mahtab.tools.grep(...)`: the toolbox loads on first use.
    if name == "tools":
        import importlib

        return importlib.import_module(__name__ + ".tools")
    raise AttributeError("module %r has no attribute %r" % (__name__, name))

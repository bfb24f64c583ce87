"""The kernel's Python runtime: cells, output and the requests the kernel
hands to Python, with no agent in it (it imports nothing of
``mahtab.agent``; ``mahtab.runtimes`` joins the two).

- ``base``: what both runtimes share; ``plain`` (plain Python) and
  ``ipython`` with ``ipython_shell`` (IPython) build on it;
- ``streams``, ``event_loop``, ``display``, ``messages``: output, the cells'
  asyncio loop, rich output, JSON for the bridge;
- ``protocol``, ``completion``, ``introspection``, ``comms``, ``debugger``:
  the requests the kernel hands to Python;
- ``figures``, ``reprs``, ``paths``, ``import_hooks``: figures as images,
  bounded reprs, the Jupyter data directory, patching a module when it is
  first imported.
"""

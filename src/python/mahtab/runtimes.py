"""The runtimes the kernel starts: each runtime of ``mahtab.runtime`` with
the agent (``mahtab.agent.api``) mixed in before it, so that the agent's
side of the runtime's hooks (an ``%%ask`` cell, its magics, the cells it
keeps for the next request) takes the place of the runtime's defaults. The
runtime package imports nothing of the agent; this module joins them."""

from mahtab.agent.api import AgentApi
from mahtab.runtime import plain


class PlainRuntime(AgentApi, plain.Runtime):
    """Plain Python cells, and the agent."""


def ipython_runtime(bridge):
    """The IPython runtime, and the agent (ImportError without IPython)."""
    from mahtab.runtime import ipython

    class IPythonRuntime(AgentApi, ipython.IPythonRuntime):
        """IPython's cells, and the agent."""

    return IPythonRuntime(bridge)

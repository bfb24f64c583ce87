"""The agent's Python side: ``ask()``, ``rlm()`` and ``%%ask`` (``api``,
light, with the runtime; ``magics`` in IPython), and what a run loads on
first use: its scope, the calls the kernel's agent makes (``scope``),
running its code (``execution``, with ``close_names``: "Did you mean" for a
missing key), other solutions tried on scratch copies (``candidates``), the
namespace summary (``namespace``), the notebook's context and skills
(``context``), the guard on what its code does (``guard``), what runs
changed and ``%ask_undo`` (``undo``), the MCP server's queries
(``mcp_queries``) and the local model's installer (``local_models``). It
imports from ``mahtab.runtime``, never the other way.
"""

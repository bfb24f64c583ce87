"""The agent's magics in the IPython runtime: ``%%ask`` and its line magics,
registered as IPython users expect (``%%ask?`` shows their help); the agent
parses them, as the plain runtime's cells of the same text
(``AgentApi._serve_special_cell``)."""

ASK_HELP = """the %%ask page of mahtab's book: docs/src/ask.md in its repository.

    %%ask [--model MODEL] [--provider anthropic|openai|claude] [--judge-model MODEL] [--max-turns N]
          [--graph default|analyst|planner|triage] [--informer] [--no-exec] [--once]
          [--approve always|risky|never] [--confirm] [--allow KINDS] [--new] [--trace] [--fresh]
    <your request>

    A cell with a record of its run (NOTEBOOK.ask.json) replays it with no model call; --fresh asks again.

    %ask_undo [N]   puts back what the last N agent runs changed
    %ask_code       puts the code the last %%ask cell ran into a new cell below
    %ask_config [--model M] [--provider P] [--max-turns N] [--graph G] [--informer] [--allow KINDS] [--replay on|off] | --reset

    %ask_graph [default|analyst|planner|triage|rlm]
"""


def register(runtime, shell):
    """Registers the agent's magics with IPython's ``shell``, each sending
    its text to ``runtime.ask_cell`` (``%ask_undo`` to ``ask_undo``)."""

    def ask(line, cell):
        runtime.ask_cell("%%ask " + line + "\n" + cell)

    def ask_config(line):
        runtime.ask_cell("%ask_config " + line)

    def ask_graph(line):
        runtime.ask_cell("%ask_graph " + line)

    def ask_code(line):
        runtime.ask_cell("%ask_code " + line)

    def ask_undo(line=""):
        runtime.ask_undo(line)

    ask.__doc__ = "Sends the cell to the agent: " + ASK_HELP
    ask_config.__doc__ = "Sets or shows the defaults of %%ask: " + ASK_HELP
    ask_graph.__doc__ = "Draws an agent graph (Mermaid), or lists them: " + ASK_HELP
    ask_code.__doc__ = "Puts the code the last %%ask cell ran into a new cell below: " + ASK_HELP
    ask_undo.__doc__ = (
        "%ask_undo [N]: puts back what the last N agent runs (%%ask, ask()) changed in the "
        "namespace and the files their tools wrote, except what your own cells changed since."
    )
    shell.register_magic_function(ask, "cell", "ask")
    shell.register_magic_function(ask_config, "line", "ask_config")
    shell.register_magic_function(ask_graph, "line", "ask_graph")
    shell.register_magic_function(ask_code, "line", "ask_code")
    shell.register_magic_function(ask_undo, "line", "ask_undo")

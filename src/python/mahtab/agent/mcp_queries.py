"""What ``mahtab mcp`` asks the kernel about its namespace, answered as
plain text: the summary of the variables the agent is given, and one value
described in detail. Called from an execute request's user expressions,
on a subshell of the MCP server's own, so it answers while cells run.
"""

from mahtab.agent.namespace import namespace_summary

# What one answer may hold; the tools say more with a narrower question.
VARIABLES_CHARS = 20000


class Text:
    """Text whose repr is itself, so user expressions hand it over as it
    is: no quotes, no escaped newlines."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text

    def _repr_pretty_(self, printer, cycle):
        printer.text(self.text)


def variables(namespace):
    """Each user variable on a line: name, type, shape or length, columns of
    tables, a short value."""
    return Text(namespace_summary(namespace, VARIABLES_CHARS) or "(no variables yet)")


def inspect(namespace, expression):
    """One value, named or given as an expression (``df.dtypes``,
    ``data['key']``), described with its type, size and first items."""
    from mahtab import tools

    try:
        value = eval(expression, namespace)
    except Exception as error:
        return Text("cannot evaluate %s: %s: %s" % (expression, type(error).__name__, error))
    return Text(tools.describe(value, expression))

"""``python -m mahtab``: the mahtab command line (``kernel``, ``install``,
``mcp``, ...) run by the wheel's extension module in this interpreter."""

import sys


def main():
    from mahtab._kernel import main as run

    return run(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())

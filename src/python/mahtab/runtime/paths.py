"""Where the kernel keeps its files: the user's Jupyter data directory
(cell history, the agent's saved conversations, local models)."""

import os


def jupyter_data_dir():
    """The Jupyter data directory, as jupyter_core finds it on Linux."""
    data_dir = os.environ.get("JUPYTER_DATA_DIR")
    if not data_dir:
        xdg = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
        data_dir = os.path.join(xdg, "jupyter")
    return data_dir


def history_file():
    """Where cell history persists across restarts: a small SQLite file in
    the Jupyter data directory (None if it cannot be made: IPython then uses
    its own location)."""
    folder = os.path.join(jupyter_data_dir(), "mahtab")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return None
    return os.path.join(folder, "history.sqlite")

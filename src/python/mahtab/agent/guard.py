"""mahtab.agent.guard: what agent code would do that the user should agree to first.

The model's code runs with the user's rights, and text in the data it reads
(a cell, a file, a DataFrame) can steer it. So before a block runs, its
syntax tree is read for four kinds of action: running shell commands,
deleting or overwriting files (the toolbox's write, write_json, move and
delete included; its edit and create, which change one text or make a new
module, not), reaching the network, and installing packages. Imports under
other names, ``from x import y as z``, ``getattr(module, "name")`` and
``__import__``/``importlib.import_module`` are followed. It is a reading of
the code, not a sandbox: what it cannot see (code built at run time) it
does not report.
"""

import ast

from mahtab.declared import GUARDED_KINDS as KINDS

_SHELL_CALLS = {
    "os.system", "os.popen", "os.execl", "os.execle", "os.execlp", "os.execlpe", "os.execv", "os.execve",
    "os.execvp", "os.execvpe", "os.spawnl", "os.spawnle", "os.spawnlp", "os.spawnlpe", "os.spawnv",
    "os.spawnve", "os.spawnvp", "os.spawnvpe", "os.posix_spawn", "os.posix_spawnp", "pty.spawn",
    "asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell",
}  # fmt: skip
_SHELL_MODULES = {"subprocess", "sh", "pexpect", "plumbum"}
_SHELL_METHODS = {"system", "getoutput"}  # get_ipython().system(...)

_FILE_CALLS = {
    "os.remove", "os.unlink", "os.rmdir", "os.removedirs", "os.rename", "os.renames", "os.replace",
    "os.truncate", "shutil.rmtree", "shutil.move", "shutil.copy", "shutil.copy2", "shutil.copyfile",
    "shutil.copytree", "os.open",
}  # fmt: skip
_FILE_METHODS = {"write_text", "write_bytes", "unlink", "rmdir", "touch"}
# The toolbox's functions that replace, move or delete files, called by name.
_TOOLBOX_FILE_CALLS = {"write", "write_json", "move", "delete"}
_OPEN_CALLS = {"open", "io.open", "codecs.open"}

_NETWORK_MODULES = {
    "socket", "urllib.request", "http.client", "requests", "httpx", "aiohttp", "ftplib", "smtplib",
    "telnetlib", "urllib3", "websocket", "websockets", "paramiko", "webbrowser",
}  # fmt: skip
_URL_PREFIXES = ("http://", "https://", "ftp://", "ws://", "wss://")

_INSTALL_WORDS = ("pip install", "pip3 install", "conda install", "mamba install", "uv pip install", "uv add")


class Finding:
    """One action of a kind the user should agree to, and where it is."""

    def __init__(self, kind, what, line):
        self.kind, self.what, self.line = kind, what, line

    def __repr__(self):
        return "Finding(%r, %r, %r)" % (self.kind, self.what, self.line)


def describe(findings):
    """What the findings amount to, one clause per kind."""
    by_kind = {}
    for finding in findings:
        by_kind.setdefault(finding.kind, []).append("%s, line %d" % (finding.what, finding.line))
    return "; ".join("%s (%s)" % (KINDS[kind], ", ".join(sorted(set(whats)))) for kind, whats in by_kind.items())


def inspect(code):
    """The findings of ``code`` (none for code that does not parse: it will
    fail before it does anything)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    reader = _Reader()
    reader.visit(tree)
    return reader.findings


def _module_of(node):
    """The module named by ``__import__("x")`` or ``importlib.import_module("x")``."""
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        name = node.args[0].value
        if isinstance(name, str):
            return name
    return None


class _Reader(ast.NodeVisitor):
    def __init__(self):
        self.names = {}  # local name -> dotted name it stands for
        self.findings = []

    def found(self, kind, what, node):
        self.findings.append(Finding(kind, what, getattr(node, "lineno", 0)))

    # -- names ---------------------------------------------------------------

    def visit_Import(self, node):
        for alias in node.names:
            if alias.asname:
                self.names[alias.asname] = alias.name
            else:
                root = alias.name.split(".")[0]
                self.names[root] = root
            self.check_module(alias.name, node)

    def visit_ImportFrom(self, node):
        module = node.module or ""
        for alias in node.names:
            if alias.name == "*":
                self.check_module(module, node)
                continue
            dotted = "%s.%s" % (module, alias.name)
            self.names[alias.asname or alias.name] = dotted
            self.check_module(dotted, node)

    def visit_Assign(self, node):
        # sp = __import__("subprocess"); run = getattr(os, "system"); s = os.system
        target = node.targets[0] if len(node.targets) == 1 else None
        if isinstance(target, ast.Name):
            dotted = self.dotted(node.value)
            if dotted is None and isinstance(node.value, ast.Call):
                callee = self.dotted(node.value.func)
                if callee in ("__import__", "importlib.import_module", "builtins.__import__"):
                    dotted = _module_of(node.value)
            if dotted is not None:
                self.names[target.id] = dotted
        self.generic_visit(node)

    def dotted(self, node):
        """The dotted name an expression stands for, if it can be read."""
        if isinstance(node, ast.Name):
            return self.names.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return None if base is None else "%s.%s" % (base, node.attr)
        if isinstance(node, ast.Call):
            callee = self.dotted(node.func)
            if callee in ("getattr", "builtins.getattr") and len(node.args) >= 2:
                base = self.dotted(node.args[0])
                name = node.args[1]
                if base is not None and isinstance(name, ast.Constant) and isinstance(name.value, str):
                    return "%s.%s" % (base, name.value)
            if callee in ("__import__", "importlib.import_module", "builtins.__import__"):
                return _module_of(node)
        return None

    # -- what is done ----------------------------------------------------------

    def check_module(self, dotted, node):
        """Importing a network module is reaching the network in practice."""
        if any(dotted == m or dotted.startswith(m + ".") for m in _NETWORK_MODULES):
            self.found("network", "import %s" % dotted, node)

    def visit_Call(self, node):
        name = self.dotted(node.func)
        if name is not None:
            self.check_call(name, node)
        elif isinstance(node.func, ast.Attribute):
            self.check_method(node.func.attr, node)
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("run_line_magic", "run_cell_magic"):
            self.check_magic(node)
        for argument in list(node.args) + [k.value for k in node.keywords]:
            self.check_argument(argument, node)
        self.generic_visit(node)

    def check_call(self, name, node):
        module = name.rsplit(".", 1)[0] if "." in name else ""
        if name in _SHELL_CALLS or any(module == m or module.startswith(m + ".") for m in _SHELL_MODULES):
            self.found("shell", name, node)
        elif name in _FILE_CALLS:
            self.found("files", name, node)
        elif name.rsplit(".", 1)[-1] in _TOOLBOX_FILE_CALLS and module in ("", "tools", "mahtab.tools"):
            self.found("files", name + "()", node)
        elif name in _OPEN_CALLS and _opens_for_writing(node):
            self.found("files", "%s(..., %r)" % (name, _mode(node) or "?"), node)
        elif any(name == m or name.startswith(m + ".") for m in _NETWORK_MODULES):
            self.found("network", name, node)
        elif name in ("pip.main", "pip._internal.main"):
            self.found("install", name, node)
        if "." in name:
            self.check_method(name.rsplit(".", 1)[1], node, known=name)

    def check_method(self, method, node, known=None):
        if method in _SHELL_METHODS and (known is None or known.startswith("get_ipython")):
            self.found("shell", known or "." + method + "()", node)
        elif method in _FILE_METHODS:
            self.found("files", "." + method + "()", node)
        elif method == "open" and _opens_for_writing(node, mode_position=0):
            self.found("files", ".open(%r)" % (_mode(node, 0) or "?"), node)

    def check_magic(self, node):
        if node.args and isinstance(node.args[0], ast.Constant):
            magic = node.args[0].value
            if magic in ("pip", "conda", "mamba", "uv"):
                self.found("install", "%" + magic, node)
            elif magic in ("system", "sx", "bash", "sh", "script"):
                self.found("shell", "%" + magic, node)

    def check_argument(self, argument, node):
        texts = []
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            texts.append(argument.value)
        elif isinstance(argument, (ast.List, ast.Tuple)):
            words = [e.value for e in argument.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            texts.append(" ".join(words))
        elif isinstance(argument, ast.JoinedStr):
            texts.append("".join(v.value for v in argument.values if isinstance(v, ast.Constant)))
        for text in texts:
            lowered = text.lower()
            if any(word in lowered for word in _INSTALL_WORDS):
                self.found("install", repr(text[:40]), node)
            if lowered.startswith(_URL_PREFIXES):
                self.found("network", repr(text[:60]), node)


def _mode(node, position=1):
    for keyword in node.keywords:
        if keyword.arg == "mode" and isinstance(keyword.value, ast.Constant):
            return keyword.value.value
    if len(node.args) > position and isinstance(node.args[position], ast.Constant):
        return node.args[position].value
    return None


def _opens_for_writing(node, mode_position=1):
    explicit = any(k.arg == "mode" for k in node.keywords) or len(node.args) > mode_position
    if not explicit:
        return False  # the default mode reads
    mode = _mode(node, mode_position)
    if not isinstance(mode, str):
        return True  # a mode chosen at run time may write
    return any(flag in mode for flag in "wax+")

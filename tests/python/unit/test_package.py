"""The shape of the package: small modules with a docstring each, imports
that point one way, and the agent's parts left out of a runtime's start."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE_ROOT = Path(__file__).resolve().parents[3] / "src" / "python"
PACKAGE_DIR = SOURCE_ROOT / "mahtab"

MAX_LINES = 600
MODULES = sorted(PACKAGE_DIR.rglob("*.py"))


def module_name(path):
    parts = ("mahtab",) + path.relative_to(PACKAGE_DIR).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path):
    """The package's modules ``path`` imports anywhere in it, at its top or
    inside a function."""
    names = {module_name(p) for p in MODULES}
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(node.module + "." + alias.name for alias in node.names)
    return {name for name in found if name in names} - {module_name(path)}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_each_module_is_short_and_says_what_it_is_for(path):
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_LINES
    assert ast.get_docstring(ast.parse(text)), f"{path.name} has no module docstring"


def test_no_module_imports_one_that_imports_it_back():
    graph = {module_name(path): imported_modules(path) for path in MODULES}
    done, path = set(), []

    def visit(name):
        if name in path:
            cycle = path[path.index(name) :] + [name]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        if name in done:
            return
        path.append(name)
        for imported in sorted(graph[name]):
            visit(imported)
        path.pop()
        done.add(name)

    for name in sorted(graph):
        visit(name)


def test_the_runtime_imports_nothing_of_the_agent():
    """The two folders' imports point one way: the agent builds on the
    runtime; the runtime needs only itself (``mahtab.runtimes`` joins
    them)."""
    runtime = [path for path in MODULES if module_name(path).startswith("mahtab.runtime.")]
    assert len(runtime) > 10
    for path in runtime:
        outside = {name for name in imported_modules(path) if not name.startswith("mahtab.runtime")}
        assert not outside, f"{module_name(path)} imports {sorted(outside)}"
    agent = [module_name(path) for path in MODULES if module_name(path).startswith("mahtab.agent")]
    assert "mahtab.agent.api" in agent and "mahtab.runtime.plain" in imported_modules(PACKAGE_DIR / "runtimes.py")


def test_the_runtime_starts_without_the_agents_parts():
    """The plain runtime's modules (and what IPython's adds to them) load
    none of the agent's: those load on its first run."""
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "import mahtab.runtimes\n"
        "print(' '.join(sorted(sys.modules)))\n" % str(SOURCE_ROOT)
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    for lazy in ("agent.scope", "agent.execution", "agent.namespace", "agent.context", "tools", "agent.guard"):
        assert "mahtab." + lazy not in loaded
    assert "difflib" not in loaded and "subprocess" not in loaded


def test_the_toolbox_loads_on_first_use():
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "import mahtab\n"
        "assert 'mahtab.tools' not in sys.modules\n"
        "print(mahtab.tools.grep('a\\nb', 'b'))\n" % str(SOURCE_ROOT)
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "2: b" in shown


def test_the_declared_names_are_what_the_modules_hold():
    """declared.json names the toolbox's functions and the guard's kinds
    for both languages (the kernel's build reads it): each toolbox name is
    a function of mahtab.tools, and the guard reports only declared kinds."""
    import json

    from mahtab import declared, tools
    from mahtab.agent import guard

    on_disk = json.loads((PACKAGE_DIR / "declared.json").read_text())
    assert list(declared.TOOLBOX_FUNCTIONS) == on_disk["toolbox_functions"] == tools.__all__
    for name in tools.__all__:
        assert callable(getattr(tools, name)), name
    assert guard.KINDS == on_disk["guarded_kinds"]
    code = "import os, shutil, urllib.request\nos.system('ls')\nshutil.rmtree('x')\nurllib.request.urlopen('u')\n"
    found = {finding.kind for finding in guard.inspect(code)}
    assert found and found <= set(guard.KINDS)

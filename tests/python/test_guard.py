"""Unit tests of the guard on agent code (src/python/mahtab/agent/guard.py, the kernel's
``mahtab.agent.guard``), loaded straight from its file: each kind of action is
found, also behind an alias, a from-import, getattr or __import__, and
ordinary data work is not. What the kernel does with the findings (asking,
refusing without stdin, --allow) is tested through the kernel in tests/it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SOURCE_ROOT = Path(__file__).resolve().parents[2] / "src" / "python"
SOURCE = SOURCE_ROOT / "mahtab" / "agent" / "guard.py"


@pytest.fixture(scope="module")
def guard():
    # The guard reads its kinds from mahtab.declared: the package's source.
    if str(SOURCE_ROOT) not in sys.path:
        sys.path.insert(0, str(SOURCE_ROOT))
    spec = importlib.util.spec_from_file_location("mahtab_guard_under_test", SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kinds(guard, code: str) -> set[str]:
    return {finding.kind for finding in guard.inspect(code)}


@pytest.mark.parametrize(
    "code",
    [
        "import os\nos.system('rm -rf /tmp/x')",
        "import subprocess\nsubprocess.run(['ls'])",
        "import subprocess as sp\nsp.check_output('ls', shell=True)",
        "from subprocess import Popen as P\nP(['ls'])",
        "import os\ngetattr(os, 'system')('ls')",
        "__import__('subprocess').run(['ls'])",
        "import importlib\nm = importlib.import_module('subprocess')\nm.call('ls')",
        "run = __import__('os').popen\nrun('ls')",
        "get_ipython().system('ls')",
        "get_ipython().run_line_magic('sx', 'ls')",
    ],
)
def test_shell_commands_are_found_however_they_are_named(guard, code: str) -> None:
    assert "shell" in kinds(guard, code), code


@pytest.mark.parametrize(
    "code",
    [
        "import os\nos.remove('data.csv')",
        "import shutil\nshutil.rmtree('results')",
        "from os import unlink as gone\ngone('x')",
        "open('notes.txt', 'w').write('x')",
        "open('log.txt', mode='a')",
        "import pathlib\npathlib.Path('a.txt').write_text('x')",
        "p = pathlib.Path('a.txt')\np.unlink()",
        "m = 'w'\nopen('x', m)",
        "delete('old.csv')",
        "move('a.csv', 'archive/')",
        "write('notes.txt', 'x')",
        "from mahtab import tools\ntools.write_json('c.json', {})",
    ],
)
def test_deleting_or_overwriting_files_is_found(guard, code: str) -> None:
    assert "files" in kinds(guard, code), code


@pytest.mark.parametrize(
    "code",
    [
        "import requests\nrequests.get('http://example.com')",
        "import urllib.request as u\nu.urlopen(x)",
        "import socket\ns = socket.socket()",
        "import pandas as pd\npd.read_csv('https://example.com/data.csv')",
        "from http.client import HTTPSConnection\nHTTPSConnection('example.com')",
    ],
)
def test_network_access_is_found(guard, code: str) -> None:
    assert "network" in kinds(guard, code), code


@pytest.mark.parametrize(
    "code",
    [
        "get_ipython().run_line_magic('pip', 'install requests')",
        "import subprocess, sys\nsubprocess.check_call([sys.executable, '-m', 'pip', 'install', 'x'])",
        "import os\nos.system('pip install pandas')",
        "import pip\npip.main(['install', 'x'])",
    ],
)
def test_installing_packages_is_found(guard, code: str) -> None:
    assert "install" in kinds(guard, code), code


@pytest.mark.parametrize(
    "code",
    [
        "total = df['price'].sum()\nprint(total)",
        "import os\nprint(os.path.join('a', 'b'), os.getcwd())",
        "with open('data.csv') as f:\n    rows = f.read()",
        "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()",
        "print(grep(log, 'ERROR'))\nedit('m.py', 'a', 'b')\ncreate('helpers', 'x = 1')",
        "this is not python (",
    ],
)
def test_ordinary_work_is_not_flagged(guard, code: str) -> None:
    assert kinds(guard, code) == set(), code


def test_findings_say_what_and_where(guard) -> None:
    findings = guard.inspect("x = 1\nimport subprocess as sp\nsp.run(['ls'])\nopen('f', 'w')")
    text = guard.describe(findings)
    assert "run shell commands (subprocess.run, line 3)" in text, text
    assert "delete or overwrite files (open(..., 'w'), line 4)" in text, text

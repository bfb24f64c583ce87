"""Unit tests of the kernel's Python package (``src/python/mahtab``),
imported straight from the source tree: no kernel, no kernelspec."""

import sys
from pathlib import Path

import pytest

SOURCE_ROOT = Path(__file__).resolve().parents[3] / "src" / "python"
PACKAGE_DIR = SOURCE_ROOT / "mahtab"

if str(SOURCE_ROOT) not in sys.path:
    sys.path.insert(0, str(SOURCE_ROOT))


@pytest.fixture(scope="session", autouse=True)
def kernelspec_installed():
    """These tests need no kernel: the parent conftest's check is not theirs."""

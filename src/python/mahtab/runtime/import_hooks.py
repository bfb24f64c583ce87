"""Adjusting a module right after it is first imported, so a module the
kernel adjusts (pdb, IPython's debugger) costs nothing until someone uses it.
"""

import importlib.abc
import sys


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Calls ``patch(module)`` right after ``module_name`` is first imported."""

    def __init__(self, module_name, patch):
        self.module_name = module_name
        self.patch = patch

    def find_spec(self, name, path=None, target=None):
        if name != self.module_name:
            return None
        # The other finders find the module; `importlib.util.find_spec` would
        # come back here. A spec may be asked for without an import (by a
        # completer, say), so this finder stays until the module is loaded.
        for finder in sys.meta_path:
            find = None if finder is self else getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader, self)
                return spec
        return None


class _PatchingLoader(importlib.abc.Loader):
    """A module's own loader, and then the patch."""

    def __init__(self, loader, finder):
        self._loader = loader
        self._finder = finder

    def __getattr__(self, name):
        # get_source, get_filename, ...: inspect and linecache ask the loader.
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        self._finder.patch(module)


def patch_on_import(module_name, patch):
    """``patch(module)`` now if the module is loaded, else when it is."""
    module = sys.modules.get(module_name)
    if module is not None:
        patch(module)
    else:
        sys.meta_path.insert(0, _PatchOnImport(module_name, patch))

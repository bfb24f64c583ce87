"""mahtab.declared: the names both languages use, read from ``declared.json``
beside this module. The kernel's build reads the same file, so Rust checks
options and lists tools with exactly these names.

- ``TOOLBOX_FUNCTIONS``: the toolbox's functions (``mahtab.tools.__all__``);
- ``GUARDED_KINDS``: the kinds of action the guard asks about, each with the
  words that say it to the user (``mahtab.agent.guard.KINDS``).
"""

import json
import pkgutil

_DECLARED = json.loads(pkgutil.get_data("mahtab", "declared.json"))

TOOLBOX_FUNCTIONS = tuple(_DECLARED["toolbox_functions"])
GUARDED_KINDS = dict(_DECLARED["guarded_kinds"])

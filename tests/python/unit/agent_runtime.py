"""What running a block of agent code asks of the runtime, without a
kernel: IPython's syntax is left as it is and anything published is
recorded. Shared by the unit tests that run agent code."""

import types


class Runtime:
    def __init__(self):
        self.published = []
        self.bridge = types.SimpleNamespace(user_code_starting=lambda: None)
        self._agent_displays = []

    def _as_python(self, code):
        return code

    def _after_code(self):
        pass

    def publish(self, *args, **kwargs):
        self.published.append(args)

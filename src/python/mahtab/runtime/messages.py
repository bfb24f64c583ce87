"""What crosses the bridge to Rust: JSON text, with bytes as base64, and the
content of an ``error`` message for an exception.

Every method the kernel calls takes and returns JSON text, so the Rust side
never walks Python objects.
"""

import json
import traceback


def json_default(value):
    """JSON for values the display machinery produces: bytes become base64."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        import base64  # only output with binary data (images) needs it

        return base64.b64encode(bytes(value)).decode("ascii")
    return repr(value)


def dumps(value):
    return json.dumps(value, default=json_default)


def error_content(exc_info, skip_files=frozenset()):
    """ename/evalue/traceback for an exception, without its first frames
    from ``skip_files``; an exception that renders its own traceback (as
    IPython lets it) does."""
    etype, value, tb = exc_info
    while tb is not None and tb.tb_frame.f_code.co_filename in skip_files:
        tb = tb.tb_next
    render = getattr(value, "_render_traceback_", None)
    lines = render() if render is not None else traceback.format_exception(etype, value, tb)
    return {
        "ename": etype.__name__,
        "evalue": str(value),
        "traceback": [line.rstrip("\n") for line in lines],
    }

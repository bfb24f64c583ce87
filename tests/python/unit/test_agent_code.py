"""How a failed block of agent code reads to the model: its own frames, and
each run of frames inside installed packages or the standard library as one
line."""

import os
import sysconfig
import traceback

from mahtab.agent import execution


def frame(path, name="f"):
    return traceback.FrameSummary(path, 3, name, line="value = table[key]")


def test_library_frames_are_summed_up_where_they_are():
    packages = sysconfig.get_paths()["purelib"]
    stdlib = sysconfig.get_paths()["stdlib"]
    frames = [
        frame("<agent>", "<module>"),
        frame(os.path.join(packages, "pandas", "core", "frame.py"), "__getitem__"),
        frame(os.path.join(packages, "pandas", "core", "indexes", "base.py"), "_get_indexer_strict"),
        frame("<agent>", "helper"),
        frame(os.path.join(stdlib, "json", "decoder.py"), "decode"),
    ]
    text = "".join(execution._frames_text(frames))
    assert text.count('File "<agent>", line 3') == 2
    assert "  ... 2 frames in pandas\n" in text
    assert "  ... 1 frame in the standard library\n" in text
    assert "frame.py" not in text and "decoder.py" not in text


def test_the_users_own_files_keep_their_frames():
    own = frame("/home/user/project/analysis.py", "load")
    assert execution._frames_text([own]) == traceback.format_list([own])

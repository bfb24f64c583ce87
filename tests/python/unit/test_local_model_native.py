"""The local model's llama.cpp server as `scripts/local-model-native.sh`
builds it for this machine's CPU: the build really uses the CPU's own
instruction sets but AMX, it serves a model here, and setting up again finds
it and does nothing."""

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "local-model-native.sh"

# /proc/cpuinfo's flag for each feature llama.cpp's system line names.
FEATURES = {
    "avx512f": "AVX512",
    "avx512_vnni": "AVX512_VNNI",
    "avx_vnni": "AVX_VNNI",
    "avx2": "AVX2",
}


def native_build():
    xllamacpp = pytest.importorskip("xllamacpp")
    marker = pathlib.Path(xllamacpp.__file__).with_name("NATIVE_BUILD")
    if not marker.exists():
        pytest.skip("the prebuilt llama.cpp server is installed (no build for this CPU)")
    return xllamacpp


def cpu_flags():
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def test_the_server_built_here_uses_every_instruction_set_the_cpu_has():
    xllamacpp = native_build()
    info = xllamacpp.get_system_info()
    flags = cpu_flags()
    wanted = [name for flag, name in FEATURES.items() if flag in flags]
    assert wanted, "no x86 vector instruction set found in /proc/cpuinfo"
    missing = [name for name in wanted if f"{name} = 1" not in info]
    assert not missing, f"built without {missing}: {info}"


def test_the_server_built_here_has_no_amx_kernels_and_serves_a_model():
    xllamacpp = native_build()
    # (llama.cpp's AMX kernels met an invalid instruction on a CPU that
    # reports AMX: the build leaves them out.)
    assert "AMX" not in xllamacpp.get_system_info()
    served = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "local-model-serves.py")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert served.returncode == 0, served.stderr[-2000:]
    assert served.stdout.startswith("served: "), served.stdout


def test_setting_up_again_keeps_the_build_and_says_nothing():
    native_build()
    done = subprocess.run(
        ["bash", str(SCRIPT), sys.executable],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "", done.stdout

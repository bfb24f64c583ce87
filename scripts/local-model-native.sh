#!/usr/bin/env bash
# Builds the local model's llama.cpp server (the xllamacpp package pinned in
# requirements-local-model.txt) from its source for this machine's CPU and
# installs it into the given Python environment, in place of the prebuilt
# wheel. The prebuilt wheel is compiled for AVX2; built with the CPU's own
# instructions (AVX-512, VNNI where present) the 1.5B coder model reads a
# prompt about 1.8 times as fast on these 2 cores (bench/README.md, "The
# local model built for this CPU"), and reading prompts is most of what a
# review costs.
#
# Built once per xllamacpp version, CPU and build flags (about ten minutes on 2
# cores) and kept as a wheel under ~/.cache/mahtab (MAHTAB_BUILD_CACHE
# elsewhere). A build is kept only once it has served the small SmolLM2
# model (its start runs a first decode); any failure keeps the prebuilt
# wheel, which works everywhere. Set MAHTAB_PREBUILT_LLAMA=1 to skip the
# build.
#
# usage: bash scripts/local-model-native.sh PYTHON
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${1:?usage: local-model-native.sh PYTHON}"

if [[ -n "${MAHTAB_PREBUILT_LLAMA:-}" ]]; then
    exit 0
fi
version="$(sed -n 's/^xllamacpp==\([^ ]*\).*/\1/p' "$root/scripts/requirements-local-model.txt")"
if [[ -z "$version" || "$(uname -s)" != Linux || "$(uname -m)" != x86_64 ]]; then
    exit 0
fi
# A wheel built with -march=native runs only where these instructions are.
cpu="$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' \
    | grep -E '^(avx|avx2|avx512[a-z_]*|avx_vnni|amx[a-z_]*|f16c|fma|bmi2)$' | sort | tr '\n' ' ' || true)"
# No AMX: on a CPU that reports it (Sapphire Rapids and later, in some VMs)
# llama.cpp's AMX kernels stop at an invalid instruction when the model's
# first batch runs, and the model reads prompts fast enough without them.
# No network at build time beyond the package index: llama.cpp's HTTPS
# client (BoringSSL, fetched by git) and llguidance are not needed by a
# server that listens on loopback.
no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
cmake_args="-DGGML_NATIVE=ON -DCMAKE_C_FLAGS='$no_amx' -DCMAKE_CXX_FLAGS='$no_amx'"
cmake_args+=" -DLLAMA_BUILD_BORINGSSL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_LLGUIDANCE=OFF"
key="$(printf '%s\n%s\n%s\n%s\n' "$version" "$cpu" "$(cc --version 2>/dev/null | head -1)" \
    "$cmake_args" | sha256sum | cut -c1-16)"
# Where the installed package records the build it is (the prebuilt one has no record).
marker() {
    "$python" -c 'import os, xllamacpp; print(os.path.join(os.path.dirname(xllamacpp.__file__), "NATIVE_BUILD"))' \
        2>/dev/null || true
}
recorded="$(marker)"
if [[ -n "$recorded" && "$(cat "$recorded" 2>/dev/null)" == "$key" ]]; then
    exit 0
fi

cache="${MAHTAB_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mahtab}"
wheels="$cache/xllamacpp-native/$key"
# A build that did not serve here is not tried again for the same key.
unusable="$cache/xllamacpp-native/$key.unusable"
if [[ -f "$unusable" ]]; then
    exit 0
fi
wheel="$(ls "$wheels"/xllamacpp-*.whl 2>/dev/null | head -1 || true)"
if [[ -z "$wheel" ]]; then
    echo "==> building the local model's llama.cpp server for this CPU (once; a few minutes)"
    log="$cache/xllamacpp-native/build-$key.log"
    mkdir -p "$wheels"
    tools="$cache/build-tools"
    build() {
        [[ -x "$tools/bin/cmake" && -x "$tools/bin/ninja" ]] \
            || { "$python" -m venv "$tools" && "$tools/bin/pip" install --quiet cmake ninja; }
        # (--no-cache-dir: pip's own cache would hand back a wheel built
        # from the same source with other flags.)
        PATH="$tools/bin:$PATH" NPROC="$(nproc)" CMAKE_ARGS="$cmake_args" \
            "$python" -m pip wheel --quiet --no-deps --no-cache-dir --no-binary xllamacpp \
            "xllamacpp==$version" -w "$wheels"
    }
    if ! build > "$log" 2>&1; then
        echo "==> the build failed (see $log); the prebuilt server stays"
        rm -rf "$wheels"
        exit 0
    fi
    wheel="$(ls "$wheels"/xllamacpp-*.whl | head -1)"
fi
"$python" -m pip install --quiet --no-deps --force-reinstall "$wheel"
# Served, not just loaded: the library loads on any CPU, and an instruction
# this one lacks shows only when the model's first batch runs.
check="$cache/xllamacpp-native/check-$key.log"
if timeout 300 "$python" "$root/scripts/local-model-serves.py" > "$check" 2>&1; then
    echo "$key" > "$(marker)"
    echo "==> the local model's server is built for this CPU"
else
    echo "==> the built server does not serve here (see $check); the prebuilt one is put back"
    rm -rf "$wheels"
    touch "$unusable"
    "$python" -m pip install --quiet --no-deps --force-reinstall \
        "xllamacpp==$version"
fi

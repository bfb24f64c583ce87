# Sourced by the build scripts: every cargo command of a run sees the same
# pyo3 settings as the wheel's build (maturin), so that build reuses the
# compiled pyo3 crates instead of compiling them again. maturin sets these
# three; with PYO3_BUILD_EXTENSION_MODULE pyo3 leaves libpython unlinked and
# build.rs links it into the binary and the tests. Needs .venv.
if [[ "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_config_var("Py_ENABLE_SHARED"))')" == 1 ]]; then
    export PYO3_PYTHON="$PWD/.venv/bin/python"
    PYO3_ENVIRONMENT_SIGNATURE="$(.venv/bin/python -c "import struct, sys
print('%s-%d.%d-%dbit' % (sys.implementation.name, *sys.version_info[:2], struct.calcsize('P') * 8))")"
    export PYO3_ENVIRONMENT_SIGNATURE
    export PYO3_BUILD_EXTENSION_MODULE=1
fi

# Sourced by the build scripts: every cargo command of a run builds pyo3
# against .venv's Python, with the settings maturin gives an extension module
# (with PYO3_BUILD_EXTENSION_MODULE pyo3 leaves libpython unlinked and
# build.rs links it into the binary and the tests). They let the wheel's
# build reuse the compiled pyo3 while the wheel used the full C API; on the
# stable ABI (feature abi3) the wheel's pyo3 is compiled apart. Needs .venv.
if [[ "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_config_var("Py_ENABLE_SHARED"))')" == 1 ]]; then
    export PYO3_PYTHON="$PWD/.venv/bin/python"
    PYO3_ENVIRONMENT_SIGNATURE="$(.venv/bin/python -c "import struct, sys
print('%s-%d.%d-%dbit' % (sys.implementation.name, *sys.version_info[:2], struct.calcsize('P') * 8))")"
    export PYO3_ENVIRONMENT_SIGNATURE
    export PYO3_BUILD_EXTENSION_MODULE=1
fi

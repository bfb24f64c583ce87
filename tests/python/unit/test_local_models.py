"""The local model's file assembled from installed data packages (what
``pip install "mahtab[local]"`` leaves), found through their metadata: two
small distributions made here stand in for the real ones."""

import hashlib
import sys
from pathlib import Path

import pytest

from mahtab.agent import local_models


def distribution(site: Path, name: str, version: str, chunk: bytes) -> None:
    """An installed distribution as pip leaves it: the package's data file
    and a dist-info whose RECORD lists it."""
    package = name.replace("-", "_")
    (site / package / "data").mkdir(parents=True)
    (site / package / "__init__.py").write_text("raise RuntimeError('never imported')\n")
    (site / package / "data" / "part01.bin").write_bytes(chunk)
    info = site / f"{package}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text(f"{package}/__init__.py,,\n{package}/data/part01.bin,,\n{info.name}/METADATA,,\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def model_of(chunks: list[bytes], packages: list[str]) -> local_models.Model:
    whole = b"".join(chunks)
    return local_models.Model(
        name="Tiny", file="tiny.gguf", packages=packages, version="1.0",
        size=len(whole), sha256=hashlib.sha256(whole).hexdigest(),
    )


def test_the_installed_chunks_are_assembled_in_order_and_checked(site: Path, tmp_path: Path) -> None:
    distribution(site, "tiny-part1", "1.0", b"GGUF-head-")
    distribution(site, "tiny-part2", "1.0", b"tail")
    model = model_of([b"GGUF-head-", b"tail"], ["tiny-part1", "tiny-part2"])
    said = []
    target = local_models.assemble_installed(model, tmp_path / "models", say=said.append)
    assert target == tmp_path / "models" / "tiny.gguf"
    assert target.read_bytes() == b"GGUF-head-tail"
    assert said[0].startswith("Tiny: assembling") and said[-1].startswith("Tiny: installed as")
    assert "tiny_part1" not in sys.modules, "a data package was imported"
    # A second call finds the file and assembles nothing.
    assert local_models.assemble_installed(model, tmp_path / "models", say=said.append) == target
    assert len(said) == 2


def test_missing_or_other_versions_of_the_packages_give_none(site: Path, tmp_path: Path) -> None:
    distribution(site, "tiny-part1", "1.0", b"a")
    distribution(site, "tiny-part2", "0.9", b"b")
    assert local_models.assemble_installed(model_of([b"a", b"b"], ["tiny-part1", "tiny-part2"]), tmp_path) is None
    assert local_models.assemble_installed(model_of([b"a"], ["tiny-part1", "tiny-part3"]), tmp_path) is None
    assert list(tmp_path.glob("*.gguf")) == []


def test_a_wrong_checksum_installs_nothing(site: Path, tmp_path: Path) -> None:
    distribution(site, "tiny-part1", "1.0", b"corrupted")
    model = model_of([b"expected!"], ["tiny-part1"])
    with pytest.raises(local_models.ModelError, match="nothing was installed"):
        local_models.assemble_installed(model, tmp_path / "models", say=lambda text: None)
    assert list((tmp_path / "models").iterdir()) == []

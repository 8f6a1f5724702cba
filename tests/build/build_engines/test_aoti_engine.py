"""``resnet50 --engine aoti`` on CPU (issue 30): the written config and package.

The build itself checks the package against the verified ONNX (a failure raises); here the
package is loaded again and compared with ONNX Runtime on batch sizes the build did not check.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.support.aoti import build_resnet50_aoti
from triton_kit.build_engines.repository import parse

pytestmark = pytest.mark.slow  # a ResNet-50 export and Inductor compile: minutes on 2 cores


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_resnet50_aoti(tmp_path_factory.mktemp("aotir50"))


def test_config_serves_the_package_through_pytorch_aoti(built: tuple[Path, Path]) -> None:
    model = built[0] / "resnet50_model"
    config = parse((model / "config.pbtxt").read_text())
    assert (config.backend, config.platform) == ("pytorch_aoti", "torch_aoti")
    assert config.default_model_filename == "model.pt2"
    assert [t.name for t in config.input] == ["INPUT__0"]
    assert [t.name for t in config.output] == ["OUTPUT__0"]
    assert config.max_batch_size == 16 and config.HasField("dynamic_batching")
    assert config.parameters["tensor_names"].string_value == (
        "INPUT__0=pixel_values;OUTPUT__0=logits"
    )
    assert sorted(p.name for p in (model / "1").iterdir()) == ["model.pt2"]
    ensemble = parse((built[0] / "resnet50" / "config.pbtxt").read_text())
    step = next(s for s in ensemble.ensemble_scheduling.step if s.model_name == "resnet50_model")
    assert dict(step.input_map) == {"INPUT__0": "pixels"}
    assert dict(step.output_map) == {"OUTPUT__0": "logits"}


def test_package_matches_onnx_runtime_at_other_batch_sizes(built: tuple[Path, Path]) -> None:
    import onnxruntime as ort

    package = built[0] / "resnet50_model" / "1" / "model.pt2"
    assert zipfile.is_zipfile(package)
    runner = torch._inductor.aoti_load_package(str(package))
    session = ort.InferenceSession(str(built[1]), providers=["CPUExecutionProvider"])
    for batch in (3, 5):
        pixels = np.random.default_rng(batch).standard_normal((batch, 3, 224, 224), np.float32)
        (expected,) = session.run(None, {"pixel_values": pixels})
        with torch.no_grad():
            got = runner(torch.from_numpy(pixels)).numpy()
        assert got.shape == (batch, 1000)
        scale = max(1.0, float(np.abs(expected).max()))
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-3 * scale)

"""Real builds of every family with and without ``--queue-policy bounded`` (issue 12 item 6).

Each family is built in-process into a temporary repository (ResNet-50 from a tiny ONNX of
the documented ``--onnx`` shape, so no ResNet-50 export; BERT and NMT from their default
checkpoints, seconds each), and every config.pbtxt is read back with protobuf's own
text_format and Triton's schema, not with the writer's helpers. The dynamically batched
models are listed here (the served models the docs name), so a build that batched none
could not pass by writing no policy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from onnx import TensorProto, helper, save
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.build_engines.cli import build_from_argv

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses"),
]

BATCHED = {
    "resnet50": {
        "resnet50_model",
        "resnet50_preprocess",
        "resnet50_uint8_preprocess",
        "resnet50_postprocess",
    },
    "bert": {"bert", "bert_model", "bert_preprocess"},
    "nmt": {"nmt"},  # the default: CTranslate2 int8, nmt the ctranslate2 backend's text mode
    "nmt-bls": {"nmt", "nmt_ct2"},  # --no-ct2-text: the tokenising python nmt, nmt_ct2 behind
    "nmt-python": {"nmt"},  # --engine onnxruntime --search python
    "nmt-rnn": {"nmt_rnn"},  # the default: the TorchScript search behind nmt_rnn
    "nmt-rnn-python": {"nmt_rnn"},  # --engine onnxruntime --search python
}
UNBATCHED = {
    "resnet50": {"resnet50", "resnet50_uint8"},  # ensembles: Triton has no queue for them
    "bert": {"bert_ensemble"},
    "nmt": set(),
    "nmt-bls": set(),
    "nmt-python": {"nmt_encoder", "nmt_decoder"},  # max_batch_size 0: the BLS model batches
    # nmt_rnn_generate: batched rows (max_batch_size), no dynamic batcher: nmt_rnn sends it whole
    # batches through BLS, one call per beam size
    "nmt-rnn": {"nmt_rnn_generate"},
    "nmt-rnn-python": {"nmt_rnn_encoder", "nmt_rnn_decoder"},
}
# Batched, but never bounded: called only by a python model that sends whole batches through
# BLS and blocks on each (bert, nmt's nmt_ct2), where any queue policy would stall a lone call
# behind Triton 2.51's 500 ms batcher poll (python_models/common/serving_policy.py); the bound
# is the front door's.
NEVER_BOUNDED = {
    "resnet50": set(),
    "bert": {"bert_model"},
    "nmt": set(),  # the text model is the front door
    "nmt-bls": {"nmt_ct2"},
    "nmt-python": set(),
    "nmt-rnn": set(),
    "nmt-rnn-python": set(),
}
BOUNDED = ["--queue-policy", "bounded", "--max-queue-size", "7", "--queue-timeout-ms", "250"]


def _tiny_resnet_onnx(path: Path) -> Path:
    """pixel_values [batch,3,224,224] -> logits [batch,1000]: mean per channel, one MatMul."""
    value_info = helper.make_tensor_value_info
    pixels = value_info("pixel_values", TensorProto.FLOAT, ["batch", 3, 224, 224])
    logits = value_info("logits", TensorProto.FLOAT, ["batch", 1000])
    weights = helper.make_tensor("w", TensorProto.FLOAT, [3, 1000], [0.001] * 3000)
    nodes = [
        helper.make_node("GlobalAveragePool", ["pixel_values"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("MatMul", ["flat", "w"], ["logits"]),
    ]
    graph = helper.make_graph(nodes, "tiny_resnet", [pixels], [logits], [weights])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _family_argv(family: str, root: Path) -> list[str]:
    if family == "resnet50":
        return ["resnet50", "--onnx", str(_tiny_resnet_onnx(root / "tiny.onnx"))]
    if family == "nmt-rnn":
        return ["nmt", "--architecture", "rnn"]
    if family == "nmt-rnn-python":
        return ["nmt", "--architecture", "rnn", "--engine", "onnxruntime", "--search", "python"]
    if family == "nmt-python":
        return ["nmt", "--engine", "onnxruntime", "--search", "python"]
    if family == "nmt-bls":
        return ["nmt", "--no-ct2-text"]
    return [family]


def _configs(repository: Path) -> dict[str, mc.ModelConfig]:
    return {
        path.parent.name: text_format.Parse(path.read_text(), mc.ModelConfig())
        for path in sorted(repository.glob("*/config.pbtxt"))
    }


@pytest.fixture(scope="module", params=sorted(BATCHED))
def built(request, tmp_path_factory) -> tuple[str, dict, dict]:
    """(family, default configs, bounded configs): the family built twice."""
    family, root = request.param, tmp_path_factory.mktemp(request.param)
    repos = {}
    for label, flags in (("default", []), ("bounded", BOUNDED)):
        repo = root / label
        common = ["--output-repository", str(repo), "--work-dir", str(root / "work")]
        build_from_argv([*_family_argv(family, root), *common, "--instances", "1", *flags])
        repos[label] = _configs(repo)
    return family, repos["default"], repos["bounded"]


def test_the_batched_models_are_the_expected_ones(built) -> None:
    family, default, bounded = built
    for configs in (default, bounded):
        assert set(configs) == BATCHED[family] | UNBATCHED[family]
        batched = {name for name, c in configs.items() if c.HasField("dynamic_batching")}
        assert batched == BATCHED[family]


def test_bounded_writes_the_policy_into_every_batched_model(built) -> None:
    family, _, bounded = built
    for name in sorted(NEVER_BOUNDED[family]):
        batching = bounded[name].dynamic_batching
        assert not batching.HasField("default_queue_policy"), name
        assert batching.max_queue_delay_microseconds == 0, name
    for name in sorted(BATCHED[family] - NEVER_BOUNDED[family]):
        batching = bounded[name].dynamic_batching
        assert batching.HasField("default_queue_policy"), name
        policy = batching.default_queue_policy
        assert policy.max_queue_size == 7, name
        assert policy.default_timeout_microseconds == 250_000, name
        assert policy.timeout_action == mc.ModelQueuePolicy.REJECT, name
        assert policy.allow_timeout_override, name


def test_the_default_writes_no_queue_policy(built) -> None:
    family, default, _ = built
    for name in sorted(BATCHED[family]):
        batching = default[name].dynamic_batching
        assert not batching.HasField("default_queue_policy"), name
        assert not batching.priority_levels and not batching.priority_queue_policy, name


def test_only_the_queue_differs_between_the_two_builds(built) -> None:
    """The flag touches nothing else: same models, same batching delays, same parameters."""
    _, default, bounded = built
    for name, config in bounded.items():
        if config.HasField("dynamic_batching"):  # (touching it would add an empty one)
            config.dynamic_batching.ClearField("default_queue_policy")
        for key in ("onnx_vs_torch_max_abs_diff",):  # re-measured per build
            config.parameters.pop(key, None)
            default[name].parameters.pop(key, None)
        assert config == default[name], name

"""What loadtest tune searches and feeds, and the input it refuses before anything starts."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from PIL import Image
from tritonclient.grpc import model_config_pb2 as mc

from triton_kit.build_engines.repository import (
    Step,
    Tensor,
    ensemble_config,
    onnx_model_config,
    python_model_config,
    write_model,
)
from triton_kit.loadtest.tune import inputs, options, space
from triton_kit.loadtest.tune.errors import TuneError

TEXT = Tensor("TEXT", "STRING", (1,))
VECTOR = Tensor("EMBEDDING", "FP32", (4,))


def tune_options(**overrides: object) -> options.TuneOptions:
    return options.TuneOptions(slo_p99_ms=100, **overrides)  # type: ignore[arg-type]


def batching_model(delay_us: int = 500, instances: int = 3) -> mc.ModelConfig:
    return python_model_config(
        "text_model", [TEXT], [VECTOR], 16, instances=instances, dynamic_batching_delay_us=delay_us
    )


def test_ranges_come_from_the_cores_and_keep_the_current_values() -> None:
    search = space.derive(batching_model(), tune_options(), cores=2, gpu=False)
    assert search.instances == (1, 2, 3)
    assert search.queue_delays_us == (0, 500, 2000)
    assert search.concurrency == (1, 2, 8)
    assert search.variant_count == 9
    assert search.paths == ("instance_group", "dynamic_batching.max_queue_delay_microseconds")
    assert search.model_config_parameters() == {
        "instance_group": [{"kind": "KIND_CPU", "count": [1, 2, 3]}],
        "dynamic_batching": {"max_queue_delay_microseconds": [0, 500, 2000]},
    }


def test_ranges_given_replace_the_derived_ones_and_add_their_fields() -> None:
    given = tune_options(
        instances=(2,), queue_delays_us=(0,), max_batch_sizes=(8, 16), preferred_batch_sizes=(4,)
    )
    search = space.derive(batching_model(), given, cores=64, gpu=True)
    assert search.paths == (
        "instance_group",
        "max_batch_size",
        "dynamic_batching.max_queue_delay_microseconds",
        "dynamic_batching.preferred_batch_size",
    )
    # a python model: it stays on the CPU on a GPU host (test_tune_config covers engines)
    params = search.model_config_parameters()
    assert params["instance_group"] == [{"kind": "KIND_CPU", "count": [2]}]
    assert params["max_batch_size"] == [8, 16]
    assert params["dynamic_batching"]["preferred_batch_size"] == [[4]]
    assert search.variant_count == 2


def test_a_model_without_batching_searches_instances_only() -> None:
    config = python_model_config("plain", [TEXT], [VECTOR], 0)
    search = space.derive(config, tune_options(), cores=8, gpu=False)
    assert search.instances == (1, 2, 3, 4) and search.paths == ("instance_group",)


def test_unknown_models_and_ensembles_are_refused_by_name(tmp_path: Path) -> None:
    write_model(tmp_path, batching_model())
    with pytest.raises(TuneError, match=r"unknown model 'nope' .* it has: text_model"):
        space.load_config(tmp_path, "nope")
    ensemble = ensemble_config(
        "pipe", [TEXT], [VECTOR], 16, [Step("text_model", {"TEXT": "TEXT"}, {"EMBEDDING": "E"})]
    )
    with pytest.raises(TuneError, match=r"pipe is an ensemble.*\(text_model\)"):
        space.derive(ensemble, tune_options(), cores=2, gpu=False)


@pytest.mark.parametrize("slo", ["0", "-5"])
def test_an_slo_of_zero_or_below_exits_2_naming_the_flag(
    slo: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        options.parse(["bert", "--slo-p99-ms", slo])
    assert exit_info.value.code == 2
    assert "--slo-p99-ms must be above 0" in capsys.readouterr().err


def test_text_inputs_get_sentences_and_optional_inputs_are_left_out() -> None:
    config = python_model_config(
        "nmt_like", [TEXT, Tensor("BEAM_SIZE", "INT32", (1,), optional=True)], [TEXT], 8
    )
    data = inputs.input_data(config)
    assert data is not None and len(data["data"]) == inputs.SAMPLES
    texts = [row["TEXT"]["content"][0] for row in data["data"]]
    assert all(row.keys() == {"TEXT"} for row in data["data"])
    assert len(set(texts)) > inputs.SAMPLES // 2 and any(c.isdigit() for c in "".join(texts))
    assert {tuple(row["TEXT"]["shape"]) for row in data["data"]} == {(1,)}


def test_image_inputs_get_encoded_images_that_decode() -> None:
    config = python_model_config("pre", [Tensor("IMAGE", "STRING", (1,))], [VECTOR], 8)
    data = inputs.input_data(config)
    assert data is not None
    formats = {
        Image.open(io.BytesIO(base64.b64decode(row["IMAGE"]["b64"]))).format for row in data["data"]
    }
    assert formats == {"JPEG", "PNG", "WEBP"}


def test_fixed_numeric_inputs_need_no_file_and_token_ids_need_a_shape() -> None:
    fixed = onnx_model_config("resnet_like", [Tensor("x", "FP32", (3, 8, 8))], [VECTOR], 8)
    assert inputs.input_data(fixed) is None
    ids = onnx_model_config("bert_like", [Tensor("input_ids", "INT64", (-1,))], [VECTOR], 8)
    with pytest.raises(TuneError, match=r"input_ids has a variable .*--shape input_ids:64"):
        inputs.input_data(ids)


def test_a_shape_given_sends_ones_of_that_shape_to_every_input() -> None:
    config = onnx_model_config(
        "bert_like",
        [Tensor("input_ids", "INT64", (-1,)), Tensor("attention_mask", "INT64", (-1,)),
         Tensor("scale", "FP32", (2,))],
        [VECTOR],
        8,
    )  # fmt: skip
    data = inputs.input_data(config, shapes=("input_ids:3", "attention_mask:3"))
    assert data == {
        "data": [
            {
                "input_ids": {"content": [1, 1, 1], "shape": [3]},
                "attention_mask": {"content": [1, 1, 1], "shape": [3]},
                "scale": {"content": [1.0, 1.0], "shape": [2]},
            }
        ]
    }
    with pytest.raises(TuneError, match="attention_mask has a variable dimension"):
        inputs.input_data(config, shapes=("input_ids:3",))
    with pytest.raises(TuneError, match="does not fit its dims"):
        inputs.input_data(config, shapes=("input_ids:3,4", "attention_mask:3"))


def test_shapes_are_checked_when_parsed() -> None:
    assert options.parse_shape("input_ids:64") == ("input_ids", (64,))
    for bad in ("input_ids", "input_ids:0", ":64", "input_ids:x"):
        with pytest.raises(TuneError, match="--shape"):
            options.parse_shape(bad)

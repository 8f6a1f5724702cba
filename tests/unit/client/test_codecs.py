"""triton_kit.client.codecs, client.base helpers and client.types without a server (Endpoint.parse:
tests/unit/client/test_transport.py).

Fast (mutation runs). Expected values are written out here, not computed by the SDK.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from triton_kit.client import ConfigurationError, InvalidInputError, Timeout, TritonClientError
from triton_kit.client.base import build_options, hidden_size, stack_embeddings
from triton_kit.client.codecs import (
    check_int,
    classify_call,
    embed_call,
    image_bytes,
    parse_classification,
    parse_embedding,
    parse_translation,
    translate_call,
)
from triton_kit.client.types import Classification, Prediction

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# ---- image_bytes -------------------------------------------------------------------------


def test_bytes_and_bytearray_pass_through() -> None:
    assert image_bytes(b"\x00abc\x00") == b"\x00abc\x00"
    out = image_bytes(bytearray(b"xy"))
    assert out == b"xy" and type(out) is bytes


def test_paths_are_read(tmp_path: Path) -> None:
    path = tmp_path / "img.bin"
    path.write_bytes(b"data\x00")
    assert image_bytes(path) == b"data\x00"
    assert image_bytes(str(path)) == b"data\x00"


def test_missing_file_is_invalid_input(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jpg"
    with pytest.raises(InvalidInputError) as caught:
        image_bytes(missing)
    assert (
        str(caught.value) == f"cannot read image file {str(missing)!r}: No such file or directory"
    )
    assert caught.value.status == "INVALID_ARGUMENT"


def test_pil_image_is_encoded_as_lossless_png() -> None:
    image = Image.new("RGB", (3, 2), (1, 2, 3))
    data = image_bytes(image)
    assert data.startswith(PNG_MAGIC)
    back = Image.open(io.BytesIO(data))
    assert back.size == (3, 2) and back.getpixel((2, 1)) == (1, 2, 3)


def test_unsupported_type_is_invalid_input() -> None:
    with pytest.raises(InvalidInputError) as caught:
        image_bytes(12)  # type: ignore[arg-type]
    assert str(caught.value) == (
        "unsupported image type int: pass encoded bytes, a file path, a PIL image or a uint8 "
        "RGB [height, width, 3] numpy array"
    )
    assert caught.value.status == "INVALID_ARGUMENT"


# ---- check_int ---------------------------------------------------------------------------


def test_check_int_bounds_are_inclusive() -> None:
    assert check_int("k", 1, 1, 5) == 1
    assert check_int("k", 5, 1, 5) == 5
    assert check_int("k", np.int64(3), 1, 5) == 3 and type(check_int("k", np.int8(3), 1)) is int
    assert check_int("k", 2**31 - 1, 0) == 2**31 - 1  # default upper bound: int32 max
    for bad in (0, 6):
        with pytest.raises(InvalidInputError) as caught:
            check_int("k", bad, 1, 5)
        assert str(caught.value) == f"k must be between 1 and 5, got {bad}"
        assert caught.value.status == "INVALID_ARGUMENT"
    with pytest.raises(
        InvalidInputError, match=r"^k must be between 0 and 2147483647, got 2147483648$"
    ):
        check_int("k", 2**31, 0)


@pytest.mark.parametrize("value", [True, 1.0, "3", None])
def test_check_int_refuses_non_integers(value: object) -> None:
    with pytest.raises(InvalidInputError) as caught:
        check_int("beam", value, 1)
    assert str(caught.value) == f"beam must be an integer, got {type(value).__name__}"
    assert caught.value.status == "INVALID_ARGUMENT"


# ---- calls -------------------------------------------------------------------------------


def test_classify_call() -> None:
    call = classify_call(b"img\x00\x00", 5)
    assert call.model == "resnet50" and call.outputs == ("CLASS_IDS", "SCORES", "LABELS")
    ((name, tensor),) = call.inputs.items()
    assert name == "IMAGE" and tensor.shape == (1, 1) and tensor.dtype == np.object_
    assert tensor[0, 0] == b"img\x00\x00"  # trailing zero bytes kept
    assert classify_call(b"x", 1, model="other").model == "other"
    for bad in (0, 6):
        with pytest.raises(InvalidInputError, match=f"^top_k must be between 1 and 5, got {bad}$"):
            classify_call(b"x", bad)


def test_embed_call_encodes_utf8() -> None:
    call = embed_call("héllo")
    assert call.model == "bert" and call.outputs == ("EMBEDDING",)
    assert call.inputs["TEXT"].tolist() == [["héllo".encode()]]
    assert embed_call(b"\xff\xfe", model="m").inputs["TEXT"][0, 0] == b"\xff\xfe"
    assert embed_call(bytearray(b"ab")).inputs["TEXT"][0, 0] == b"ab"


def test_text_type_and_encoding_errors() -> None:
    with pytest.raises(InvalidInputError) as caught:
        embed_call(3)  # type: ignore[arg-type]
    assert str(caught.value) == "text must be str or bytes, got int"
    assert caught.value.status == "INVALID_ARGUMENT"
    with pytest.raises(InvalidInputError) as caught:
        embed_call("\ud800")  # lone surrogate
    assert str(caught.value).startswith("text is not encodable as UTF-8: ")
    assert caught.value.status == "INVALID_ARGUMENT"


def test_translate_call_optional_inputs() -> None:
    plain = translate_call("one", None, None)
    assert plain.model == "nmt" and set(plain.inputs) == {"TEXT"}
    assert plain.inputs["TEXT"].tolist() == [[b"one"]]
    assert plain.outputs == ("TRANSLATION",)
    full = translate_call("one", 4, 32, model="nmt_rnn")
    assert full.model == "nmt_rnn"
    assert full.inputs["BEAM_SIZE"].tolist() == [[4]] and full.inputs["BEAM_SIZE"].dtype == np.int32
    assert full.inputs["MAX_LENGTH"].tolist() == [[32]]
    assert full.inputs["MAX_LENGTH"].dtype == np.int32
    # The wire limit is checked here; the meaningful range is the server's job.
    assert translate_call("x", -(2**31), 0).inputs["BEAM_SIZE"].tolist() == [[-(2**31)]]
    with pytest.raises(InvalidInputError, match=r"^beam_size \(BEAM_SIZE\) must be between"):
        translate_call("x", 2**31, None)
    with pytest.raises(InvalidInputError, match=r"^max_length \(MAX_LENGTH\) must be between"):
        translate_call("x", None, -(2**31) - 1)


# ---- parsing -----------------------------------------------------------------------------


def test_parse_classification_keeps_top_k_in_order() -> None:
    outputs = {
        "CLASS_IDS": np.array([[7, 3, 1]], dtype=np.int64),
        "SCORES": np.array([[0.5, 0.25, 0.125]], dtype=np.float32),
        "LABELS": np.array([[b"seven", "three", b"one"]], dtype=np.object_),
    }
    result = parse_classification(outputs, 2)
    assert result == Classification((Prediction(7, "seven", 0.5), Prediction(3, "three", 0.25)))
    assert type(result.predictions[0].class_id) is int
    assert type(result.predictions[0].score) is float
    assert result.top == Prediction(7, "seven", 0.5)
    assert result.class_ids == [7, 3] and result.scores == [0.5, 0.25]
    assert len(parse_classification(outputs, 3).predictions) == 3
    short = {**outputs, "SCORES": np.array([[0.5, 0.25]], dtype=np.float32)}
    with pytest.raises(ValueError):  # a reply whose outputs disagree is not silently cut
        parse_classification(short, 3)


def test_parse_embedding_and_translation() -> None:
    vector = parse_embedding({"EMBEDDING": np.array([[1, 2, 3]], dtype=np.float64)})
    assert vector.shape == (3,) and vector.dtype == np.float32 and vector.tolist() == [1, 2, 3]
    text = parse_translation({"TRANSLATION": np.array([[b"quatre"]], dtype=np.object_)})
    assert text == "quatre"
    assert parse_translation({"TRANSLATION": np.array([["déjà"]], dtype=np.object_)}) == "déjà"


# ---- client.base helpers -----------------------------------------------------------------


def test_hidden_size_from_metadata() -> None:
    metadata = {"outputs": [{"name": "X", "shape": [1]}, {"name": "EMBEDDING", "shape": [-1, 384]}]}
    assert hidden_size(metadata) == 384
    assert hidden_size({"outputs": [{"name": "V", "shape": [2, 4, 8]}]}, output="V") == 8
    with pytest.raises(TritonClientError, match=r"^model metadata has no EMBEDDING output: "):
        hidden_size({"outputs": [{"name": "X", "shape": [4]}]})
    with pytest.raises(TritonClientError):
        hidden_size({})


def test_stack_embeddings() -> None:
    rows = [np.array([1.0, 2.0], dtype=np.float32), np.array([3.0, 4.0], dtype=np.float32)]
    assert stack_embeddings(rows).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    empty = stack_embeddings([], 384)
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    assert stack_embeddings([]).shape == (0, 0)


def _options(**overrides: object):
    values = dict(
        timeout=None,
        max_concurrency=4,
        models=None,
        versions=None,
        headers=None,
        retry=None,
        tls=None,
        compression=None,
        shared_memory=None,
        shared_memory_threshold=0,
        cuda_device=0,
    )
    return build_options(**{**values, **overrides})


def test_build_options_defaults_and_overrides() -> None:
    options = _options()
    assert options.timeout == Timeout(request=60.0, connect=10.0)
    assert options.models == {
        "classify": "resnet50",
        "classify_uint8": "resnet50_uint8",
        "embed": "bert",
        "translate": "nmt",
    }
    assert options.versions == {} and options.headers == {} and options.api_key is None
    custom = _options(
        timeout=2.5, models={"embed": "bert_large"}, versions={"bert": 3}, headers={"h": "v"}
    )
    assert custom.timeout == Timeout(request=2.5, connect=10.0)
    assert custom.models["embed"] == "bert_large" and custom.models["classify"] == "resnet50"
    assert custom.versions == {"bert": "3"} and custom.headers == {"h": "v"}
    assert _options(api_key="k").api_key == "k"


def test_build_options_refuses_unknown_model_keys() -> None:
    with pytest.raises(ConfigurationError) as caught:
        _options(models={"embed": "x", "translat": "y"})
    assert str(caught.value) == (
        "models= keys must be among ['classify', 'classify_uint8', 'embed', 'translate'], "
        "got ['translat']"
    )


def test_timeout_of() -> None:
    default = Timeout(request=5.0, connect=2.0)
    assert Timeout.of(None, default) is default
    given = Timeout(request=1.0, connect=1.0)
    assert Timeout.of(given, default) is given
    assert Timeout.of(3, default) == Timeout(request=3.0, connect=2.0)
    assert type(Timeout.of(3, default).request) is float
    assert Timeout() == Timeout(request=60.0, connect=10.0)


def test_model_versions_come_from_the_options() -> None:
    from triton_kit.client.base import ClientBase

    base = ClientBase("grpc://h:1", max_concurrency=4, versions={"bert": 2})
    assert base._version("bert", None) == "2"
    assert base._version("bert", 7) == "7"
    assert base._version("nmt", None) == ""
    assert base.protocol == "grpc" and base.models["embed"] == "bert"
    assert repr(base) == "ClientBase('grpc://h:1')"


def test_build_options_passes_the_connection_settings_through() -> None:
    from triton_kit.client.options import TLS

    tls = TLS(ca_file="/ca.pem")
    options = _options(
        tls=tls,
        compression="gzip",
        shared_memory="system",
        shared_memory_threshold=4096,
        cuda_device=1,
        max_concurrency=3,
        retry=4,  # retries after the first try
    )
    assert options.tls is tls and options.compression == "gzip"
    assert options.shared_memory == "system" and options.shared_memory_threshold == 4096
    assert options.cuda_device == 1 and options.max_concurrency == 3
    assert options.retry.attempts == 5 and _options(retry=0).retry.attempts == 1


def test_client_base_state_and_requests() -> None:
    from triton_kit.client import ClientClosedError
    from triton_kit.client.base import ClientBase

    base = ClientBase("http://h:2", 9.0, max_concurrency=4)
    assert base.url == "http://h:2" and base._hidden_size is None and not base.closed
    assert base.timeout == Timeout(9.0, 10.0) and base.max_concurrency == 4
    call = embed_call("x")
    request = base._request(call, 1.5, "id-1", {"h": "v"}, 3, idempotent=False)
    assert request.call is call and request.timeout == Timeout(1.5, 10.0)
    assert request.request_id == "id-1" and request.headers == {"h": "v"}
    assert request.version == "3" and request.idempotent is False
    plain = base._request(call, None)
    assert plain.timeout == Timeout(9.0, 10.0) and plain.request_id == ""
    assert plain.headers is None and plain.version is None and plain.idempotent is True
    base.closed = True
    with pytest.raises(ClientClosedError) as caught:
        base._request(call, None)
    assert str(caught.value) == "http://h:2: the client is closed"
    assert caught.value.url == "http://h:2"


def test_as_list_refuses_arrays_and_scalars() -> None:
    from triton_kit.client.base import as_list

    for bad, name in ((np.array(["a"]), "ndarray"), (3, "int"), ({"a"}, "set")):
        with pytest.raises(InvalidInputError) as caught:
            as_list(bad)
        assert str(caught.value) == f"expected a str/bytes or a list of them, got {name}"
        assert caught.value.status == "INVALID_ARGUMENT"
    assert as_list(("a", b"b")) == (["a", b"b"], False)

"""ResNet-50 pre/post-processing functions without a server (fast: mutation runs).

Expected values are restated here (ImageNet constants, hand-computed softmax, crop
offsets of images built so that every column has a known value), never computed by
``triton_kit.python_models.resnet50.image``.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from PIL import Image

from triton_kit.python_models.common.base import InvalidInput
from triton_kit.python_models.resnet50.image import (
    ImageLimits,
    PreprocessSpec,
    decode_image,
    image_format,
    preprocess,
    preprocess_bytes,
    softmax,
    top_k,
)

MEAN_RGB = (0.485, 0.456, 0.406)  # torchvision's ImageNet normalisation, RGB order
STD_RGB = (0.229, 0.224, 0.225)


def _encode(image: Image.Image, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def _solid(rgb: tuple[int, int, int], size: tuple[int, int] = (300, 260)) -> Image.Image:
    return Image.new("RGB", size, rgb)


# ---- preprocess ------------------------------------------------------------------------


def test_solid_image_is_normalised_per_channel_in_rgb_order() -> None:
    pixels = preprocess(_solid((200, 100, 50)))
    assert pixels.shape == (3, 224, 224) and pixels.dtype == np.float32
    assert pixels.flags["C_CONTIGUOUS"]
    for channel, value in enumerate((200, 100, 50)):
        expected = (value / 255 - MEAN_RGB[channel]) / STD_RGB[channel]
        np.testing.assert_allclose(pixels[channel], expected, rtol=0, atol=1e-5)


def test_black_and_white_extremes() -> None:
    black = preprocess(_solid((0, 0, 0)))
    white = preprocess(_solid((255, 255, 255)))
    for channel in range(3):
        assert black[channel, 0, 0] == pytest.approx(-MEAN_RGB[channel] / STD_RGB[channel], 1e-5)
        expected_white = (1 - MEAN_RGB[channel]) / STD_RGB[channel]
        assert white[channel, 5, 7] == pytest.approx(expected_white, 1e-5)


def _columns(width: int, height: int) -> Image.Image:
    """Grey image whose column x has value x // 2: the crop offset can be read back."""
    row = (np.arange(width) // 2).astype(np.uint8)
    return Image.fromarray(np.repeat(row[None, :], height, axis=0)).convert("RGB")


def _rows(width: int, height: int) -> Image.Image:
    column = (np.arange(height) // 2).astype(np.uint8)
    return Image.fromarray(np.repeat(column[:, None], width, axis=1)).convert("RGB")


def _grey(pixels: np.ndarray) -> np.ndarray:
    """Undo the normalisation of channel 0: back to 0..255 values."""
    return np.round((pixels[0] * STD_RGB[0] + MEAN_RGB[0]) * 255)


def test_centre_crop_of_a_wide_image_keeps_the_middle_columns() -> None:
    # Shorter side 256 already: no resize; left = (300 - 224) // 2 = 38.
    grey = _grey(preprocess(_columns(300, 256)))
    assert grey[0, 0] == 38 // 2 and grey[0, 223] == (38 + 223) // 2
    assert grey[100, 0] == 19 and grey[223, 1] == 19  # every row the same


def test_centre_crop_of_a_tall_image_keeps_the_middle_rows() -> None:
    # top = (301 - 224) // 2 = 38 (floor, not round).
    grey = _grey(preprocess(_rows(256, 301)))
    assert grey[0, 0] == 38 // 2 and grey[223, 0] == (38 + 223) // 2


def test_shorter_side_is_resized_to_256_before_cropping() -> None:
    # 128 x 150 scales by 2 to 256 x 300; a column image then reads (x_resized // 2) // 2.
    grey = _grey(preprocess(_columns(128, 150)))
    # left = (256 - 224) // 2 = 16 in resized pixels = column 8 of the source: value 4.
    assert abs(grey[0, 0] - 4) <= 1
    assert abs(grey[0, 223] - (16 + 223) / 4) <= 1.5


def test_custom_spec_sizes() -> None:
    spec = PreprocessSpec(resize_shorter=40, crop=32)
    assert preprocess(_solid((1, 2, 3), (64, 48)), spec).shape == (3, 32, 32)
    # A very wide image: the height becomes resize_shorter, never below the crop.
    assert preprocess(_solid((9, 9, 9), (1000, 10))).shape == (3, 224, 224)


def test_default_spec_values() -> None:
    assert PreprocessSpec() == PreprocessSpec(resize_shorter=256, crop=224)
    assert ImageLimits() == ImageLimits(
        max_bytes=20 * 1024 * 1024, max_pixels=40_000_000, min_side=8
    )


def test_preprocess_bytes_decodes_then_preprocesses() -> None:
    pixels = preprocess_bytes(_encode(_solid((10, 20, 30))))
    expected = (20 / 255 - MEAN_RGB[1]) / STD_RGB[1]
    assert pixels[1, 50, 50] == pytest.approx(expected, abs=1e-5)
    small = preprocess_bytes(
        _encode(_solid((10, 20, 30), (20, 20))), PreprocessSpec(16, 16), ImageLimits(min_side=4)
    )
    assert small.shape == (3, 16, 16)
    with pytest.raises(InvalidInput, match="at least 30 pixels"):
        preprocess_bytes(_encode(_solid((0, 0, 0), (20, 20))), limits=ImageLimits(min_side=30))


# ---- decode_image ------------------------------------------------------------------------


def test_png_jpeg_and_webp_decode_to_rgb() -> None:
    for fmt in ("PNG", "JPEG", "WEBP"):
        image = decode_image(_encode(_solid((255, 0, 0), (16, 12)), fmt))
        assert image.mode == "RGB" and image.size == (16, 12)
        red, green, blue = image.getpixel((8, 6))
        assert red > 240 and green < 15 and blue < 15, (fmt, image.getpixel((8, 6)))


def test_greyscale_rgba_and_cmyk_become_rgb() -> None:
    assert decode_image(_encode(Image.new("L", (10, 10), 77))).getpixel((1, 1)) == (77, 77, 77)
    rgba = decode_image(_encode(Image.new("RGBA", (10, 10), (1, 2, 3, 4))))
    assert rgba.mode == "RGB" and rgba.getpixel((0, 0)) == (1, 2, 3)
    cmyk = decode_image(_encode(Image.new("CMYK", (10, 10), (0, 255, 255, 0)), "JPEG"))
    r, g, b = cmyk.getpixel((5, 5))
    assert cmyk.mode == "RGB" and r > 240 and g < 15 and b < 15  # pure red


def test_empty_image_is_rejected_with_its_size() -> None:
    with pytest.raises(InvalidInput, match=r"^IMAGE is empty \(0 bytes\)$"):
        decode_image(b"")


def test_byte_limit_is_inclusive() -> None:
    data = _encode(_solid((0, 0, 0), (10, 10)))
    assert decode_image(data, ImageLimits(max_bytes=len(data))).size == (10, 10)
    with pytest.raises(InvalidInput) as caught:
        decode_image(data, ImageLimits(max_bytes=len(data) - 1))
    assert str(caught.value) == (f"IMAGE is {len(data)} bytes; the limit is {len(data) - 1} bytes")


def test_pixel_limit_is_inclusive() -> None:
    data = _encode(_solid((0, 0, 0), (10, 12)))
    assert decode_image(data, ImageLimits(max_pixels=120)).size == (10, 12)
    with pytest.raises(InvalidInput) as caught:
        decode_image(data, ImageLimits(max_pixels=119))
    assert str(caught.value) == "image is 10x12 = 120 pixels; the limit is 119 pixels"


def test_min_side_is_inclusive_on_either_side() -> None:
    assert decode_image(_encode(_solid((0, 0, 0), (8, 50)))).size == (8, 50)
    for size in ((7, 50), (50, 7)):
        with pytest.raises(InvalidInput) as caught:
            decode_image(_encode(_solid((0, 0, 0), size)))
        width, height = size
        assert str(caught.value) == (
            f"image is {width}x{height} pixels; each side must be at least 8 pixels"
        )


def test_garbage_bytes_name_their_length_and_start() -> None:
    data = b"not an image at all"
    with pytest.raises(InvalidInput) as caught:
        decode_image(data)
    assert str(caught.value) == (
        f"IMAGE is not a decodable image ({len(data)} bytes, starts with {data[:8]!r}); "
        "send JPEG, PNG or WebP bytes"
    )


def test_truncated_jpeg_names_its_format() -> None:
    data = _encode(Image.effect_noise((64, 64), 50).convert("RGB"), "JPEG")
    with pytest.raises(InvalidInput, match=r"^IMAGE could not be decoded \(JPEG\): "):
        decode_image(data[: len(data) // 2])


def test_decompression_bomb_header_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _encode(_solid((0, 0, 0), (64, 64)))
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # 4096 px > 2x: PIL raises
    with pytest.raises(InvalidInput) as caught:
        decode_image(data, ImageLimits(max_pixels=10**9))
    assert str(caught.value) == (
        "image header claims too many pixels; the limit is 1000000000 pixels"
    )
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 3000)  # over 1x, under 2x: a warning
    with pytest.raises(InvalidInput, match="image header claims too many pixels"):
        decode_image(data, ImageLimits(max_pixels=10**9))


def test_image_format_names_the_format_or_says_unknown() -> None:
    assert image_format(_encode(_solid((0, 0, 0), (9, 9)), "JPEG")) == "JPEG"
    assert image_format(_encode(_solid((0, 0, 0), (9, 9)), "PNG")) == "PNG"
    assert image_format(b"\x00\x01garbage") == "unknown format"


# ---- softmax and top_k -------------------------------------------------------------------


def _hand_softmax(values: list[float]) -> list[float]:
    exps = [math.exp(v) for v in values]
    return [e / sum(exps) for e in exps]


def test_softmax_matches_the_definition_and_is_shift_invariant() -> None:
    logits = np.array([1.0, 2.0, 3.0])
    expected = _hand_softmax([1.0, 2.0, 3.0])  # 0.0900, 0.2447, 0.6652
    np.testing.assert_allclose(softmax(logits), expected, rtol=1e-6)
    np.testing.assert_allclose(softmax(logits + 1000.0), expected, rtol=1e-6)  # no overflow
    assert softmax(logits.astype(np.float32)).dtype == np.float32


def test_softmax_is_per_row() -> None:
    logits = np.array([[0.0, 0.0], [0.0, math.log(3.0)]])
    np.testing.assert_allclose(softmax(logits), [[0.5, 0.5], [0.25, 0.75]], rtol=1e-6)


def test_top_k_orders_by_probability_with_ties_to_the_lower_id() -> None:
    logits = np.array([0.5, 3.0, 1.0, 3.0, -2.0])
    ids, scores = top_k(logits, 3)
    assert ids.tolist() == [1, 3, 2] and ids.dtype == np.int64
    expected = _hand_softmax([0.5, 3.0, 1.0, 3.0, -2.0])
    np.testing.assert_allclose(scores, [expected[1], expected[3], expected[2]], rtol=1e-6)


def test_top_k_of_a_batch() -> None:
    logits = np.array([[9.0, 1.0, 5.0], [1.0, 2.0, 3.0]])
    ids, scores = top_k(logits, 2)
    assert ids.tolist() == [[0, 2], [2, 1]]
    np.testing.assert_allclose(scores[1], _hand_softmax([1.0, 2.0, 3.0])[2:0:-1], rtol=1e-6)
    assert top_k(logits, 1)[0].shape == (2, 1)


# ---- the Triton models' own code, driven without Triton ------------------------------------


def _model(cls, parameters: dict[str, str], version_dir=None):
    """setup() as initialize() would call it, with a parsed parameters block."""
    from triton_kit.python_models.common.parameters import ModelParameters

    model = cls()
    model.params = ModelParameters(parameters)
    model.version_dir = version_dir
    model.setup()
    return model


def test_preprocessor_reads_its_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    from triton_kit.python_models.resnet50.model import ImagePreprocessor

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", Image.MAX_IMAGE_PIXELS)  # restored after
    model = _model(
        ImagePreprocessor,
        {
            "resize_shorter": "40",
            "crop": "32",
            "max_image_bytes": "5000",
            "max_image_pixels": "90000",
            "min_image_side": "3",
        },
    )
    assert model.spec == PreprocessSpec(resize_shorter=40, crop=32)
    assert model.limits == ImageLimits(max_bytes=5000, max_pixels=90000, min_side=3)
    assert Image.MAX_IMAGE_PIXELS == 90000  # PIL's bomb guard follows the configured limit
    defaults = _model(ImagePreprocessor, {})
    assert defaults.spec == PreprocessSpec(256, 224)
    assert defaults.limits == ImageLimits(20 * 1024 * 1024, 40_000_000, 8)


def test_preprocessor_batch_of_bytes_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    from triton_kit.python_models.resnet50.model import ImagePreprocessor

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", Image.MAX_IMAGE_PIXELS)
    model = _model(ImagePreprocessor, {"resize_shorter": "20", "crop": "16", "min_image_side": "4"})
    red, blue = _encode(_solid((255, 0, 0), (20, 20))), _encode(_solid((0, 0, 255), (30, 20)))
    # Triton hands BYTES tensors as object arrays of bytes, [batch, 1].
    images = np.array([[red], [np.frombuffer(blue, dtype=np.uint8)]], dtype=np.object_)
    pixels = model.process_one({"IMAGE": images})["PIXELS"]
    assert pixels.shape == (2, 3, 16, 16) and pixels.dtype == np.float32
    assert pixels[0, 0, 8, 8] == pytest.approx((1 - MEAN_RGB[0]) / STD_RGB[0], abs=1e-5)
    assert pixels[1, 2, 8, 8] == pytest.approx((1 - MEAN_RGB[2]) / STD_RGB[2], abs=1e-5)
    with pytest.raises(InvalidInput, match="at least 4 pixels"):
        model.process_one({"IMAGE": np.array([[_encode(_solid((0, 0, 0), (3, 9)))]], np.object_)})
    with pytest.raises(InvalidInput, match=r"^IMAGE is empty \(0 bytes\)$"):
        model.process_one({"IMAGE": np.array([[b""]], dtype=np.object_)})


def test_postprocessor_labels_by_id(tmp_path) -> None:
    from triton_kit.python_models.resnet50.model import TopKPostprocessor

    (tmp_path / "labels.txt").write_text("zero\nun\ndeux\ntrois, 3\n", encoding="utf-8")
    (tmp_path / "other.txt").write_text("a\nb\nc\nd\n", encoding="utf-8")
    model = _model(TopKPostprocessor, {"top_k": "2"}, tmp_path)
    logits = np.array([[0.0, 5.0, 1.0, 7.0], [9.0, 0.0, 0.0, 1.0]], dtype=np.float32)
    out = model.process_one({"LOGITS": logits})
    assert out["CLASS_IDS"].tolist() == [[3, 1], [0, 3]]
    assert out["LABELS"].tolist() == [[b"trois, 3", b"un"], [b"zero", b"trois, 3"]]
    assert out["LABELS"].dtype == np.object_
    expected = _hand_softmax([0.0, 5.0, 1.0, 7.0])
    np.testing.assert_allclose(out["SCORES"][0], [expected[3], expected[1]], rtol=1e-5)
    assert _model(TopKPostprocessor, {}, tmp_path).k == 5
    custom = _model(TopKPostprocessor, {"labels_file": "other.txt", "top_k": "1"}, tmp_path)
    assert custom.process_one({"LOGITS": logits})["LABELS"].tolist() == [[b"d"], [b"a"]]
    (tmp_path / "accents.txt").write_text("café\n", encoding="utf-8")
    accents = _model(TopKPostprocessor, {"labels_file": "accents.txt", "top_k": "1"}, tmp_path)
    assert accents.labels.tolist() == ["café".encode()]


def _reference_pipeline(image: Image.Image) -> np.ndarray:
    """The published recipe restated: shorter side 256 (bilinear), floor-centred 224 crop."""
    width, height = image.size
    scale = 256 / min(width, height)
    new_w, new_h = max(224, round(width * scale)), max(224, round(height * scale))
    resized = image.resize((new_w, new_h), Image.BILINEAR)
    left, top = (new_w - 224) // 2, (new_h - 224) // 2
    rgb = np.asarray(resized, dtype=np.float64)[top : top + 224, left : left + 224] / 255.0
    return ((rgb - np.array(MEAN_RGB)) / np.array(STD_RGB)).transpose(2, 0, 1)


@pytest.mark.parametrize("size", [(256, 303), (303, 256), (100, 131), (131, 100), (224, 224)])
def test_noise_images_match_the_restated_recipe(size: tuple[int, int]) -> None:
    # Noise shows the resampling filter; odd margins show floor vs rounding of the offset.
    image = Image.merge("RGB", [Image.effect_noise(size, 80).convert("L") for _ in range(3)])
    np.testing.assert_allclose(preprocess(image), _reference_pipeline(image), rtol=0, atol=1e-5)


def test_tall_image_is_resized_on_both_axes() -> None:
    # 128 x 150 -> 256 x 300; top = (300 - 224) // 2 = 38 resized rows = 19 source rows.
    grey = _grey(preprocess(_rows(128, 150)))
    assert abs(grey[0, 0] - 19 // 2) <= 1 and abs(grey[223, 0] - (38 + 223) // 4) <= 1


def test_softmax_rows_of_very_different_scale() -> None:
    out = softmax(np.array([[0.0, 0.0], [1000.0, 1000.0]], dtype=np.float32))
    np.testing.assert_allclose(out, [[0.5, 0.5], [0.5, 0.5]])


def test_top_k_ties_in_a_long_row_keep_the_lower_ids() -> None:
    ids, _ = top_k(np.zeros((2, 1000), dtype=np.float32), 5)
    assert ids.tolist() == [[0, 1, 2, 3, 4]] * 2

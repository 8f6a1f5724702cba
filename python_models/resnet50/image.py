"""ResNet-50 pre- and post-processing: pure functions plus their Triton models.

The functions are the single definition of the pipeline: the Triton models call
them, and tests and benchmarks call them in-process for the reference result.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

import numpy as np
from PIL import Image, UnidentifiedImageError

from python_models.common.base import Arrays, InvalidInput, PythonModel
from python_models.common.contracts import CLASS_IDS, LABELS, SCORES

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


@dataclass(frozen=True)
class ImageLimits:
    """What the pre-processor accepts; over-limit images are rejected, not resized."""

    max_bytes: int = 20 * 1024 * 1024
    max_pixels: int = 40_000_000
    min_side: int = 8


@dataclass(frozen=True)
class PreprocessSpec:
    resize_shorter: int = 256
    crop: int = 224


def check_size(width: int, height: int, limits: ImageLimits) -> None:
    if width * height > limits.max_pixels:
        raise InvalidInput(
            f"image is {width}x{height} = {width * height} pixels; "
            f"the limit is {limits.max_pixels} pixels"
        )
    if min(width, height) < limits.min_side:
        raise InvalidInput(
            f"image is {width}x{height} pixels; each side must be at least {limits.min_side} pixels"
        )


def decode_image(
    data: bytes, limits: ImageLimits = ImageLimits(), load: bool = True
) -> Image.Image:
    """Bytes to an RGB PIL image, with a reason for every rejection.

    ``load=False`` checks the header only (size limits) and returns the unloaded image:
    the GPU path decodes the pixels itself.
    """
    if not data:
        raise InvalidInput("IMAGE is empty (0 bytes)")
    if len(data) > limits.max_bytes:
        raise InvalidInput(f"IMAGE is {len(data)} bytes; the limit is {limits.max_bytes} bytes")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            check_size(*image.size, limits)
            if not load:
                return image
            image.load()
    except InvalidInput:
        raise
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as exc:
        # PIL's own guard fires inside Image.open, before our size check can run.
        raise InvalidInput(
            f"image header claims too many pixels; the limit is {limits.max_pixels} pixels"
        ) from exc
    except UnidentifiedImageError as exc:
        raise InvalidInput(
            f"IMAGE is not a decodable image ({len(data)} bytes, starts with {data[:8]!r}); "
            "send JPEG, PNG or WebP bytes"
        ) from exc
    except (OSError, SyntaxError, ValueError) as exc:
        raise InvalidInput(f"IMAGE could not be decoded ({image_format(data)}): {exc}") from exc
    return image.convert("RGB")


def image_format(data: bytes) -> str:
    try:
        return Image.open(io.BytesIO(data)).format or "unknown format"
    except Exception:
        return "unknown format"


def resized_size(width: int, height: int, spec: PreprocessSpec) -> tuple[int, int]:
    """(width, height) with the shorter side at ``resize_shorter``, neither below the crop."""
    scale = spec.resize_shorter / min(width, height)
    return max(spec.crop, round(width * scale)), max(spec.crop, round(height * scale))


def preprocess(image: Image.Image, spec: PreprocessSpec = PreprocessSpec()) -> np.ndarray:
    """Resize shorter side (bilinear), centre-crop, scale to [0,1], ImageNet-normalise; CHW."""
    size = resized_size(*image.size, spec)
    resized = image.resize(size, Image.BILINEAR)
    left = (size[0] - spec.crop) // 2
    top = (size[1] - spec.crop) // 2
    cropped = resized.crop((left, top, left + spec.crop, top + spec.crop))
    pixels = np.asarray(cropped, dtype=np.float32) / 255.0
    pixels = (pixels - IMAGENET_MEAN) / IMAGENET_STD
    return np.ascontiguousarray(pixels.transpose(2, 0, 1), dtype=np.float32)


def preprocess_bytes(
    data: bytes, spec: PreprocessSpec = PreprocessSpec(), limits: ImageLimits = ImageLimits()
) -> np.ndarray:
    return preprocess(decode_image(data, limits), spec)


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float32) - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def top_k(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Class ids and softmax probabilities, descending; ties keep the lower id first."""
    probs = softmax(logits)
    ids = np.argsort(-probs, axis=-1, kind="stable")[..., :k]
    return ids.astype(np.int64), np.take_along_axis(probs, ids, axis=-1)


def _as_bytes(item: object) -> bytes:
    return item if isinstance(item, bytes) else bytes(item)


class ImagePreprocessor(PythonModel):
    """IMAGE (encoded bytes) -> PIXELS (FP32 [3, crop, crop]).

    On a ``KIND_GPU`` instance (and where torchvision imports) JPEGs are decoded by nvJPEG
    and resized/normalised by torch on that GPU (:mod:`python_models.resnet50.gpu`); other
    formats are decoded by PIL there. Elsewhere the PIL path runs, unchanged.
    """

    def initialize(self, args: dict[str, str]) -> None:
        gpu = args.get("model_instance_kind", "CPU") == "GPU"
        self.gpu_device = f"cuda:{args.get('model_instance_device_id', 0)}" if gpu else None
        super().initialize(args)

    def setup(self) -> None:
        self.spec = PreprocessSpec(
            resize_shorter=self.params.int("resize_shorter", 256),
            crop=self.params.int("crop", 224),
        )
        self.limits = ImageLimits(
            max_bytes=self.params.int("max_image_bytes", ImageLimits.max_bytes),
            max_pixels=self.params.int("max_image_pixels", ImageLimits.max_pixels),
            min_side=self.params.int("min_image_side", ImageLimits.min_side),
        )
        # PIL's bomb guard follows the configured limit (warning above it, error at 2x).
        Image.MAX_IMAGE_PIXELS = self.limits.max_pixels
        self.recipe = self._torch_recipe()  # None: the PIL path

    def _torch_recipe(self):  # -> TorchPreprocess | None
        """On a GPU instance: nvJPEG + torch there. ``torch_on_cpu``: the same code on CPU
        (tests run the GPU path's batching and errors that way; JPEGs by PIL without
        torchvision)."""
        device = getattr(self, "gpu_device", None)
        if device is None and not self.params.bool("torch_on_cpu", False):
            return None
        try:
            import torch

            from python_models.resnet50.gpu import TorchPreprocess
        except Exception as exc:
            self.logger.warning("%s: torch pre-processing off (%s); PIL", self.model_name, exc)
            return None
        torchvision = _torchvision_imports()
        if device is not None:
            if not torch.cuda.is_available() or not torchvision:
                why = "torchvision does not import" if torch.cuda.is_available() else "no GPU"
                self.logger.warning("%s: KIND_GPU but %s; PIL on CPU", self.model_name, why)
                return None
            torch.cuda.set_device(device)
        return TorchPreprocess(self.spec, device or "cpu", torchvision)

    def process_batch(self, batch: list[Arrays]) -> list[Arrays | Exception]:
        """PIL: one request at a time. Torch: every image of the batch decoded and resized
        together, one host copy; a bad image fails its own request only."""
        if self.recipe is None:
            return super().process_batch(batch)
        datas = [[_as_bytes(item) for item in inputs["IMAGE"].reshape(-1)] for inputs in batch]
        images = self.recipe.decode([d for request in datas for d in request], self.limits)
        good = [image for image in images if not isinstance(image, Exception)]
        pixels = iter(self.recipe.pixels(good) if good else ())
        results: list[Arrays | Exception] = []
        start = 0
        for request in datas:
            mine = images[start : start + len(request)]
            start += len(request)
            own = [next(pixels) for image in mine if not isinstance(image, Exception)]
            error = next((image for image in mine if isinstance(image, Exception)), None)
            if error is None and not own:
                error = InvalidInput("IMAGE holds no image")
            results.append(error if error is not None else {"PIXELS": np.stack(own)})
        return results

    def process_one(self, inputs: Arrays) -> Arrays:
        items = inputs["IMAGE"].reshape(-1)
        pixels = [preprocess_bytes(_as_bytes(item), self.spec, self.limits) for item in items]
        return {"PIXELS": np.stack(pixels)}


def _torchvision_imports() -> bool:
    try:
        import torchvision.io  # noqa: F401  (decode_jpeg: nvJPEG on a CUDA device)
    except Exception:  # missing, or built for another torch ("torchvision::nms does not exist")
        return False
    return True


class RawImagePreprocessor(ImagePreprocessor):
    """IMAGE_UINT8 (RGB uint8 [height, width, 3], decoded by the client) -> PIXELS.

    The same resize/crop/normalise as the encoded path (PIL on CPU, torch on a GPU
    instance); the size limits apply, the byte limit does not (there is no encoding).
    """

    def process_batch(self, batch: list[Arrays]) -> list[Arrays | Exception]:
        return PythonModel.process_batch(self, batch)  # one request at a time

    def process_one(self, inputs: Arrays) -> Arrays:
        images = inputs["IMAGE_UINT8"]
        if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
            raise InvalidInput(
                f"IMAGE_UINT8 must be RGB uint8 [height, width, 3] per image, got "
                f"{images.dtype} {list(images.shape[1:])}"
            )
        check_size(images.shape[2], images.shape[1], self.limits)
        if self.recipe is not None:
            tensors = [self.recipe.from_hwc(image) for image in images]
            return {"PIXELS": self.recipe.pixels(tensors)}
        pixels = [preprocess(Image.fromarray(image, "RGB"), self.spec) for image in images]
        return {"PIXELS": np.stack(pixels)}


class TopKPostprocessor(PythonModel):
    """LOGITS -> CLASS_IDS, SCORES (softmax, descending) and LABELS."""

    def setup(self) -> None:
        self.k = self.params.int("top_k", 5)
        labels_file = self.version_dir / self.params.str("labels_file", "labels.txt")
        labels = labels_file.read_text(encoding="utf-8").splitlines()
        self.labels = np.array([label.encode("utf-8") for label in labels], dtype=np.object_)

    def process_one(self, inputs: Arrays) -> Arrays:
        ids, scores = top_k(inputs["LOGITS"], self.k)
        return {CLASS_IDS: ids, SCORES: scores, LABELS: self.labels[ids]}

"""ResNet-50's served python models: pre-processors (PIL, or torch on a GPU) and top-k.

They call the pure functions of :mod:`triton_kit.python_models.resnet50.image`; a ``KIND_GPU``
instance uses :mod:`triton_kit.python_models.resnet50.gpu` instead of PIL.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from triton_kit.python_models.common.base import Arrays, InvalidInput, PythonModel
from triton_kit.python_models.common.contracts import CLASS_IDS, LABELS, SCORES
from triton_kit.python_models.resnet50.image import (
    ImageLimits,
    PreprocessSpec,
    check_size,
    preprocess,
    preprocess_bytes,
    top_k,
)


def _as_bytes(item: object) -> bytes:
    return item if isinstance(item, bytes) else bytes(item)


class ImagePreprocessor(PythonModel):
    """IMAGE (encoded bytes) -> PIXELS (FP32 [3, crop, crop]).

    On a ``KIND_GPU`` instance (and where torchvision imports) JPEGs are decoded by nvJPEG
    and resized/normalised by torch on that GPU (:mod:`triton_kit.python_models.resnet50.gpu`);
    other formats are decoded by PIL there. Elsewhere the PIL path runs, unchanged.
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

            from triton_kit.python_models.resnet50.gpu import TorchPreprocess
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
        """PIL: one request at a time, image by image. Torch: the batch's images decoded and
        resized together, in chunks within DECODE_PIXEL_BUDGET decoded pixels (contracts); a
        bad image fails its own request only."""
        if self.recipe is None:
            return super().process_batch(batch)
        datas = [[_as_bytes(item) for item in inputs["IMAGE"].reshape(-1)] for inputs in batch]
        rows = self.recipe.preprocess([d for request in datas for d in request], self.limits)
        results: list[Arrays | Exception] = []
        start = 0
        for request in datas:
            mine = rows[start : start + len(request)]
            start += len(request)
            own = [row for row in mine if not isinstance(row, Exception)]
            error = next((row for row in mine if isinstance(row, Exception)), None)
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
            return {"PIXELS": self.recipe.pixels_hwc(images)}
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

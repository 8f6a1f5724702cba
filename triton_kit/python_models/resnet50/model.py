"""ResNet-50's served python models: pre-processors (PIL, or torch on a GPU) and top-k.

They call the pure functions of :mod:`triton_kit.python_models.resnet50.image`; a ``KIND_GPU``
instance uses :mod:`triton_kit.python_models.resnet50.gpu` instead of PIL.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from triton_kit.python_models.common.base import Arrays, InvalidInput, PythonModel
from triton_kit.python_models.common.contracts import CLASS_IDS, LABELS, SCORES
from triton_kit.python_models.resnet50.gpu import Pixels
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
        # Torch path, served by Triton only: PIXELS leave as the recipe's tensor through
        # DLPack (on a GPU instance: device memory, which resnet50_model reads there) instead
        # of a numpy copy on the host. Off unless the config says so (not yet measured on a
        # GPU). A model set up in process (setup alone, as the benchmarks do) keeps numpy.
        self.pixels_on_device = self.recipe is not None and self.params.bool(
            "pixels_on_device", False
        )

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
        self.pixels_on_device = False  # numpy PIXELS; initialize may say otherwise
        if self.recipe is not None and getattr(self, "profile", None) is not None:
            self.recipe.on_phase = self._phase

    def _phase(self, phase: str, seconds: float) -> None:
        """The torch path's phases in the execute profile (TRITON_KIT_PROFILE_DIR)."""
        if self.profile is not None:
            self.profile.add(f"torch.{phase}", seconds)

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
        resized together (one stack per decoded size), in chunks within DECODE_PIXEL_BUDGET
        decoded pixels (contracts); each request's PIXELS are its rows of the result; a bad
        image fails its own request only."""
        if self.recipe is None:
            return super().process_batch(batch)
        datas = [[_as_bytes(item) for item in inputs["IMAGE"].reshape(-1)] for inputs in batch]
        pixels = self.recipe.preprocess([d for request in datas for d in request], self.limits)
        return self._per_request(pixels, [len(request) for request in datas], "IMAGE")

    def _per_request(
        self, pixels: Pixels, counts: list[int], name: str
    ) -> list[Arrays | Exception]:
        """Each request's PIXELS (its ``counts[i]`` images, in order): a slice of the batch,
        on the host, or left on the device where ``pixels_on_device`` says so; or the first
        InvalidInput among its images."""
        batch = pixels.batch if self.pixels_on_device else self.recipe.host(pixels.batch)
        results: list[Arrays | Exception] = []
        start = 0
        for count in counts:
            mine = pixels.rows[start : start + count]
            start += count
            error = next((row for row in mine if isinstance(row, Exception)), None)
            if error is None and not mine:
                error = InvalidInput(f"{name} holds no image")
            if error is not None:
                results.append(error)
                continue
            first = mine[0]  # a request's good images are a run of rows
            results.append({"PIXELS": batch[first : first + count]})
        if self.pixels_on_device:
            self.recipe.synchronize()  # the rows are complete before the stub copies them
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
        """PIL: one request at a time. Torch: every request's images resized together (one
        stack per image size, within DECODE_PIXEL_BUDGET pixels at a time), each request's
        PIXELS its rows of the result; a request whose IMAGE_UINT8 is wrong fails alone."""
        if self.recipe is None:
            return PythonModel.process_batch(self, batch)
        results: list[Arrays | Exception] = []
        good: list[tuple[int, np.ndarray]] = []
        for index, inputs in enumerate(batch):
            try:
                good.append((index, self._checked(inputs["IMAGE_UINT8"])))
                results.append({})  # its PIXELS, below
            except InvalidInput as exc:
                results.append(exc)
        if not good:
            return results
        images = [image for _, request in good for image in request]  # views, no copy
        pixels = Pixels(self.recipe.pixels_hwc(images), list(range(len(images))))
        counts = [len(request) for _, request in good]
        mine = self._per_request(pixels, counts, "IMAGE_UINT8")
        for (index, _), result in zip(good, mine, strict=True):
            results[index] = result
        return results

    def process_one(self, inputs: Arrays) -> Arrays:
        images = self._checked(inputs["IMAGE_UINT8"])
        if self.recipe is not None:
            return {"PIXELS": self.recipe.host(self.recipe.pixels_hwc(images))}
        pixels = [preprocess(Image.fromarray(image, "RGB"), self.spec) for image in images]
        return {"PIXELS": np.stack(pixels)}

    def _checked(self, images: np.ndarray) -> np.ndarray:
        """IMAGE_UINT8 as it must be: RGB uint8 [n, height, width, 3] within the size limits."""
        if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
            raise InvalidInput(
                f"IMAGE_UINT8 must be RGB uint8 [height, width, 3] per image, got "
                f"{images.dtype} {list(images.shape[1:])}"
            )
        check_size(images.shape[2], images.shape[1], self.limits)
        if images.shape[0] == 0:
            raise InvalidInput("IMAGE_UINT8 holds no image")
        return images


class TopKPostprocessor(PythonModel):
    """LOGITS -> CLASS_IDS, SCORES (softmax, descending) and LABELS."""

    def setup(self) -> None:
        self.k = self.params.int("top_k", 5)
        labels_file = self.version_dir / self.params.str("labels_file", "labels.txt")
        labels = labels_file.read_text(encoding="utf-8").splitlines()
        self.labels = np.array([label.encode("utf-8") for label in labels], dtype=np.object_)

    def process_batch(self, batch: list[Arrays]) -> list[Arrays | Exception]:
        """Every request's LOGITS rows in one softmax and sort (rows are independent: each
        is what it is alone); each response its own rows."""
        logits = [inputs["LOGITS"] for inputs in batch]
        if len({row.shape[1:] for row in logits}) != 1 or any(row.ndim != 2 for row in logits):
            return super().process_batch(batch)  # shapes Triton would not send: one by one
        outputs = self.process_one({"LOGITS": np.concatenate(logits)})
        results: list[Arrays | Exception] = []
        start = 0
        for rows in logits:
            end = start + len(rows)
            results.append({name: value[start:end] for name, value in outputs.items()})
            start = end
        return results

    def process_one(self, inputs: Arrays) -> Arrays:
        ids, scores = top_k(inputs["LOGITS"], self.k)
        return {CLASS_IDS: ids, SCORES: scores, LABELS: self.labels[ids]}

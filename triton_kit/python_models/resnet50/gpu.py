"""ResNet-50 pre-processing in torch: nvJPEG decode and resize/crop/normalise on the GPU.

Why: on a GPU host the PIL path costs CPU time per image that the GPU could spend, and
clients that decode themselves send UINT8 HWC pixels that only need resizing. The recipe is
:func:`triton_kit.python_models.resnet50.image.preprocess`'s (shorter side to 256 bilinear
with PIL's antialiasing, 8-bit rounding after the resize, centre crop, ImageNet mean/std),
written with torch so it runs wherever the tensors are. On CPU the Triton models keep PIL;
this module runs there too, for tests. Python 3.10.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from triton_kit.python_models.common.base import InvalidInput
from triton_kit.python_models.common.contracts import DECODE_PIXEL_BUDGET
from triton_kit.python_models.resnet50.image import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    ImageLimits,
    PreprocessSpec,
    decode_image,
    resized_size,
)

JPEG_MAGIC = b"\xff\xd8\xff"


class TorchPreprocess:
    """CHW or HWC uint8 images in, FP32 [n, 3, crop, crop] out, on ``device``."""

    def __init__(
        self,
        spec: PreprocessSpec,
        device: str = "cpu",
        torchvision: bool = True,
        pixel_budget: int = DECODE_PIXEL_BUDGET,
    ) -> None:
        import torch

        self.torch = torch
        self.spec = spec
        self.device = torch.device(device)
        self.torchvision = torchvision  # decode_jpeg available (nvJPEG on a CUDA device)
        self.pixel_budget = pixel_budget  # decoded pixels held at once (see contracts)
        self.mean = torch.tensor(IMAGENET_MEAN, device=self.device).view(3, 1, 1) * 255
        self.std = torch.tensor(IMAGENET_STD, device=self.device).view(3, 1, 1) * 255

    def from_hwc(self, image: np.ndarray):
        """A [H, W, 3] uint8 array as a CHW tensor on the device."""
        tensor = self.torch.from_numpy(np.array(image, copy=True, order="C"))
        return tensor.to(self.device).permute(2, 0, 1)  # pinning per image costs more

    def decode_jpegs(self, datas: Sequence[bytes]) -> list:
        """nvJPEG (``torchvision.io.decode_jpeg`` on the device), RGB CHW uint8 tensors."""
        from torchvision.io import ImageReadMode, decode_jpeg

        encoded = [self.torch.frombuffer(bytearray(d), dtype=self.torch.uint8) for d in datas]
        return list(decode_jpeg(encoded, mode=ImageReadMode.RGB, device=self.device))

    def preprocess(self, datas: Sequence[bytes], limits: ImageLimits) -> list:
        """PIXELS (FP32 [3, crop, crop] on the host), or the InvalidInput to report, per
        encoded image, in order.

        Decoded and resized a chunk at a time, each chunk at most ``pixel_budget`` decoded
        pixels (from the headers; one image over it goes alone), so device memory is bounded
        by the budget, not by the batch. Each image's pixels are those of :meth:`decode` then
        :meth:`pixels` on the whole batch.
        """
        out, sizes = self._headers(datas, limits)
        valid = [index for index, result in enumerate(out) if result is None]
        for chunk in budget_chunks([sizes[index] for index in valid], self.pixel_budget):
            indices = [valid[position] for position in chunk]
            rows = self._chunk([datas[index] for index in indices], limits)
            for index, row in zip(indices, rows, strict=True):
                out[index] = row
        return out

    def _chunk(self, datas: Sequence[bytes], limits: ImageLimits) -> list:
        """Decode and resize one chunk of images whose headers passed; its decoded tensors
        are freed on return."""
        images = self._decode_checked(datas, limits, [None] * len(datas))  # headers: checked
        good = [image for image in images if not isinstance(image, Exception)]
        rows = iter(self.pixels(good) if good else ())
        return [image if isinstance(image, Exception) else next(rows) for image in images]

    def decode(self, datas: Sequence[bytes], limits: ImageLimits) -> list:
        """A CHW tensor, or the InvalidInput to report, per encoded image (all at once: see
        :meth:`preprocess` for a batch).

        Limits are checked from each header first; JPEGs go to ``decode_jpeg`` in one call
        (image by image if that call fails), the rest and any JPEG it refuses (CMYK, ...) to
        PIL.
        """
        return self._decode_checked(datas, limits, self._headers(datas, limits)[0])

    def _decode_checked(self, datas: Sequence[bytes], limits: ImageLimits, out: list) -> list:
        """:meth:`decode` once the headers are checked (``out``: None or the header's error)."""
        out = list(out)
        jpegs = [
            i for i, d in enumerate(datas) if out[i] is None and self.torchvision and is_jpeg(d)
        ]
        if jpegs:
            self._decode_jpegs(datas, jpegs, out)
        for index, data in enumerate(datas):
            if out[index] is None:
                try:
                    out[index] = self.from_hwc(np.asarray(decode_image(data, limits)))
                except InvalidInput as exc:
                    out[index] = exc
        return out

    @staticmethod
    def _headers(datas: Sequence[bytes], limits: ImageLimits) -> tuple[list, list[int]]:
        """Per image: the InvalidInput its header earns (else None), and its pixel count."""
        out: list = [None] * len(datas)
        sizes = [0] * len(datas)
        for index, data in enumerate(datas):
            try:
                width, height = decode_image(data, limits, load=False).size
                sizes[index] = width * height
            except InvalidInput as exc:
                out[index] = exc
        return out, sizes

    def _decode_jpegs(self, datas: Sequence[bytes], indices: list[int], out: list) -> None:
        try:
            decoded = self.decode_jpegs([datas[i] for i in indices])
            for index, image in zip(indices, decoded, strict=True):
                out[index] = image
            return
        except RuntimeError:  # one refused JPEG fails the whole call: retry one by one
            pass
        for index in indices:
            try:
                out[index] = self.decode_jpegs([datas[index]])[0]
            except RuntimeError:
                out[index] = None  # PIL decodes it (or names what is wrong with it)

    def pixels_hwc(self, images: np.ndarray) -> np.ndarray:
        """:meth:`pixels` of [n, H, W, 3] uint8 images, copied to the device at most
        ``pixel_budget`` pixels at a time."""
        counts = [images.shape[1] * images.shape[2]] * len(images)
        return np.concatenate(
            [
                self.pixels([self.from_hwc(images[index]) for index in chunk])
                for chunk in budget_chunks(counts, self.pixel_budget)
            ]
        )

    def pixels(self, images: Sequence) -> np.ndarray:
        """Resize each CHW uint8 image, crop, normalise; stacked on the host."""
        with self.torch.inference_mode():
            batch = self.torch.stack([self._one(image) for image in images])
            return batch.cpu().numpy()

    def _one(self, image):
        functional = self.torch.nn.functional
        crop = self.spec.crop
        width, height = resized_size(image.shape[2], image.shape[1], self.spec)
        x = image.unsqueeze(0).float()
        for size in ((image.shape[1], width), (height, width)):  # PIL: rows, then columns
            x = functional.interpolate(
                x, size=size, mode="bilinear", antialias=True, align_corners=False
            )
            x = x.round_().clamp_(0, 255)  # each pass of PIL's resize writes 8 bits
        x = x[0]
        top, left = (height - crop) // 2, (width - crop) // 2
        x = x[:, top : top + crop, left : left + crop]
        return (x - self.mean) / self.std


def budget_chunks(pixels: Sequence[int], budget: int) -> Iterator[list[int]]:
    """The indices of ``pixels``, in order, in runs whose pixels total at most ``budget``;
    an image over the budget alone goes in a run of its own (the per-image limit bounds it)."""
    chunk: list[int] = []
    total = 0
    for index, count in enumerate(pixels):
        if chunk and total + count > budget:
            yield chunk
            chunk, total = [], 0
        chunk.append(index)
        total += count
    if chunk:
        yield chunk


def is_jpeg(data: bytes) -> bool:
    return data[:3] == JPEG_MAGIC

"""ResNet-50 pre-processing in torch: nvJPEG decode and resize/crop/normalise on the GPU.

Why: on a GPU host the PIL path costs CPU time per image that the GPU could spend, and
clients that decode themselves send UINT8 HWC pixels that only need resizing. The recipe is
:func:`triton_kit.python_models.resnet50.image.preprocess`'s (shorter side to 256 bilinear
with PIL's antialiasing, 8-bit rounding after the resize, centre crop, ImageNet mean/std),
written with torch so it runs wherever the tensors are. On CPU the Triton models keep PIL;
this module runs there too, for tests. Python 3.10.

Images of one decoded size are resized together: one stacked batch per size, so a call's
kernel launches grow with the number of distinct sizes, not of images (the GPU host launches
kernels slowly; issue 30). Interpolation is per sample, so the pixels are those of resizing
each image alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

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


@dataclass
class Pixels:
    """What a batch of images became: ``batch`` [rows, 3, crop, crop] FP32 (a torch tensor on
    the recipe's device), and per image its row in ``batch`` or the InvalidInput to report.
    Rows follow the images' order, so a run of good images is a run of rows."""

    batch: object
    rows: list[int | InvalidInput]


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
        # Seconds per phase (headers, decode, resize, ...) when set: the execute profile's
        # (TRITON_KIT_PROFILE_DIR). The device is synchronised before each reading.
        self.on_phase: Callable[[str, float], None] | None = None

    def from_hwc(self, image: np.ndarray):
        """A [H, W, 3] uint8 array as a CHW tensor on the device."""
        tensor = self.torch.from_numpy(np.array(image, copy=True, order="C"))
        return tensor.to(self.device).permute(2, 0, 1)  # pinning per image costs more

    def decode_jpegs(self, datas: Sequence[bytes]) -> list:
        """nvJPEG (``torchvision.io.decode_jpeg`` on the device), RGB CHW uint8 tensors,
        the whole list in one call (torchvision decodes a list as one batch)."""
        from torchvision.io import ImageReadMode, decode_jpeg

        encoded = [self.torch.frombuffer(bytearray(d), dtype=self.torch.uint8) for d in datas]
        return list(decode_jpeg(encoded, mode=ImageReadMode.RGB, device=self.device))

    def preprocess(self, datas: Sequence[bytes], limits: ImageLimits) -> Pixels:
        """Every encoded image's PIXELS, or the InvalidInput to report, in order.

        Decoded and resized a chunk at a time, each chunk at most ``pixel_budget`` decoded
        pixels (from the headers; one image over it goes alone), so device memory is bounded
        by the budget, not by the batch: a chunk's decoded uint8 images (3 bytes a pixel),
        then its FP32 stacks (12 bytes a pixel, ~1 GB at the budget) and their first resize
        pass. Each image's pixels are those of :meth:`decode` then :meth:`pixels` on the
        whole batch.
        """
        lap = self._clock()
        rows, sizes = self._headers(datas, limits)
        lap("headers")
        valid = [index for index, result in enumerate(rows) if result is None]
        parts = []
        count = 0
        for chunk in budget_chunks([sizes[index] for index in valid], self.pixel_budget):
            indices = [valid[position] for position in chunk]
            part, errors = self._chunk([datas[index] for index in indices], limits, lap)
            if part is not None:
                parts.append(part)
            for index, error in zip(indices, errors, strict=True):
                if error is None:
                    rows[index] = count
                    count += 1
                else:
                    rows[index] = error
        batch = self._joined(parts)
        lap("join")
        return Pixels(batch, rows)

    def _chunk(self, datas: Sequence[bytes], limits: ImageLimits, lap: Callable[[str], None]):
        """Decode and resize one chunk of images whose headers passed: (their pixels, or None
        when none decoded; per image None or its InvalidInput). The decoded tensors are freed
        on return, before the next chunk is decoded."""
        images = self._decode_checked(datas, limits, [None] * len(datas))  # headers: checked
        lap("decode")
        good = [image for image in images if not isinstance(image, Exception)]
        part = self.resize(good) if good else None
        lap("resize")
        return part, [image if isinstance(image, Exception) else None for image in images]

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

    def pixels_hwc(self, images: Sequence[np.ndarray]):
        """FP32 [n, 3, crop, crop] on the device for ``images`` ([H, W, 3] uint8 each, of any
        sizes: a [n, H, W, 3] array, or the images of several requests), copied to the device
        at most ``pixel_budget`` pixels at a time, each size's images of a chunk in one copy."""
        lap = self._clock()
        counts = [image.shape[0] * image.shape[1] for image in images]
        parts = [
            self._hwc_chunk([images[index] for index in chunk], lap)
            for chunk in budget_chunks(counts, self.pixel_budget)
        ]
        batch = self._joined(parts)
        lap("join")
        return batch

    def _hwc_chunk(self, images: Sequence[np.ndarray], lap: Callable[[str], None]):
        """One chunk of :meth:`pixels_hwc`; its uploaded images are freed on return."""
        groups = same_size_groups([image.shape for image in images])
        uploads = [self._upload([images[position] for position in group]) for group in groups]
        lap("upload")
        part = self._resize_groups(list(zip(groups, uploads, strict=True)), len(images))
        lap("resize")
        return part

    def _upload(self, images: Sequence[np.ndarray]):
        """Same-size [H, W, 3] uint8 arrays as one [n, 3, H, W] tensor on the device."""
        stacked = np.stack(images)  # one host copy (writable: inputs may be read-only)
        return self.torch.from_numpy(stacked).to(self.device).permute(0, 3, 1, 2)

    def pixels(self, images) -> np.ndarray:
        """:meth:`resize`, on the host (numpy)."""
        return self.host(self.resize(images))

    def host(self, batch) -> np.ndarray:
        """A result tensor as a numpy array on the host."""
        return batch.cpu().numpy()

    def synchronize(self) -> None:
        """Wait for the device's queued work (results handed out as device memory)."""
        if self.device.type == "cuda":
            self.torch.cuda.current_stream(self.device).synchronize()

    def resize(self, images):
        """Resize, crop and normalise CHW uint8 images (a sequence, or one [n, 3, H, W]
        tensor); FP32 [n, 3, crop, crop] on the device, in the images' order. Images of one
        size go through each step together, stacked."""
        torch = self.torch
        if isinstance(images, torch.Tensor) and images.ndim == 4:
            return self._resize_groups([(list(range(len(images))), images)], len(images))
        groups = same_size_groups([tuple(image.shape) for image in images])
        pairs = [(group, torch.stack([images[i] for i in group])) for group in groups]
        return self._resize_groups(pairs, len(images))

    def _resize_groups(self, groups: list[tuple[list[int], object]], count: int):
        """``count`` images given as (their positions, their [n, 3, H, W] uint8 stack) per
        size: resized a stack at a time, rows in position order."""
        torch = self.torch
        with torch.inference_mode():
            if len(groups) == 1:
                return self._resize_same_size(groups[0][1])
            crop = self.spec.crop
            out = torch.empty((count, 3, crop, crop), device=self.device)
            for positions, batch in groups:
                index = torch.tensor(positions, device=self.device)
                out.index_copy_(0, index, self._resize_same_size(batch))
            return out

    def _resize_same_size(self, batch):
        """[n, 3, H, W] uint8 -> [n, 3, crop, crop] FP32: two antialiased bilinear passes
        (PIL: rows, then columns), each rounded to 8 bits as PIL's resize writes them, then
        the centre crop and the ImageNet normalisation."""
        functional = self.torch.nn.functional
        crop = self.spec.crop
        height_in, width_in = batch.shape[2], batch.shape[3]
        width, height = resized_size(width_in, height_in, self.spec)
        x = batch.contiguous().float()
        for size in ((height_in, width), (height, width)):  # PIL: rows, then columns
            x = functional.interpolate(
                x, size=size, mode="bilinear", antialias=True, align_corners=False
            )
            x = x.round_().clamp_(0, 255)  # each pass of PIL's resize writes 8 bits
        top, left = (height - crop) // 2, (width - crop) // 2
        x = x[:, :, top : top + crop, left : left + crop]
        return ((x - self.mean) / self.std).contiguous()

    def _joined(self, parts: list):
        """The chunks' results as one tensor (no copy for one chunk)."""
        if len(parts) == 1:
            return parts[0]
        if not parts:
            crop = self.spec.crop
            return self.torch.empty((0, 3, crop, crop), device=self.device)
        return self.torch.cat(parts)

    def _clock(self) -> Callable[[str], None]:
        """``lap(phase)``: adds the time since the last lap to ``phase`` (when ``on_phase``
        is set; a no-op otherwise)."""
        report = self.on_phase
        if report is None:
            return _no_lap
        synchronize = self.device.type == "cuda"
        last = [time.perf_counter()]

        def lap(phase: str) -> None:
            if synchronize:
                self.torch.cuda.synchronize(self.device)
            now = time.perf_counter()
            report(phase, now - last[0])
            last[0] = now

        return lap


def _no_lap(phase: str) -> None:
    pass


def same_size_groups(shapes: Sequence[tuple[int, ...]]) -> list[list[int]]:
    """The positions of ``shapes`` grouped by shape, groups in order of first appearance."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for position, shape in enumerate(shapes):
        groups.setdefault(tuple(shape), []).append(position)
    return list(groups.values())


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

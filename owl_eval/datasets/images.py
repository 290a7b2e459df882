"""Image folders in torchvision's ``ImageFolder`` layout: ``<class>/<image>``, or ``<split>/<class>/<image>``
with ``train/`` and ``test/`` (also ``val/``, ``validation/``) sub-folders each in that layout.

Classes are the sorted folder names (as torchvision); files with other extensions and hidden files are left out,
as torchvision does. Images are decoded with Pillow, converted to RGB, resized to ``image_size`` (``int`` or
``[h, w]``; required when the images differ in size) and kept as ``[N, H, W, 3]`` uint8, or ``[N, H*W*3]`` with
``flatten=True``. Also decodes the image column of a Hugging Face data set.

An image declaring more pixels than Pillow's decompression-bomb limit (``PIL.Image.MAX_IMAGE_PIXELS``, 89,478,485
by default; that default holds even where a library switched the check off) is one error naming the file and its
size, before it is decoded: a few kilobytes of PNG can declare gigabytes of pixels.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from owl_eval.datasets.base import DataSet, Digest, fail, make_dataset, text
from owl_eval.errors import ConfigError

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")
SPLIT_NAMES = ("train", "test", "val", "validation")
DEFAULT_PIXEL_LIMIT = 89_478_485  # Pillow's own default MAX_IMAGE_PIXELS (a 256 MB RGBA image)


def image_size_hw(image_size: int | Sequence[int] | None) -> tuple[int, int] | None:
    if image_size is None:
        return None
    if isinstance(image_size, int | np.integer) and not isinstance(image_size, bool):
        size = (int(image_size), int(image_size))
    elif isinstance(image_size, Sequence) and not isinstance(image_size, str) and len(image_size) == 2:
        size = (image_size[0], image_size[1])
    else:
        raise fail(f"image_size: {image_size!r}; expected an int or [height, width]")
    if not all(isinstance(n, int | np.integer) and not isinstance(n, bool) and n > 0 for n in size):
        raise fail(f"image_size: {image_size!r}; expected positive integers")
    return int(size[0]), int(size[1])


def pixel_limit() -> int:
    """The most pixels an image may declare: Pillow's ``Image.MAX_IMAGE_PIXELS``, or its default where a library
    switched the check off (set it to None): a small file declaring a huge image is never decoded."""
    limit = Image.MAX_IMAGE_PIXELS
    return int(limit) if limit else DEFAULT_PIXEL_LIMIT


def _too_large(where: str, width: int, height: int, limit: int) -> Exception:
    return fail(
        f"{where}: declares {width}x{height} pixels ({width * height}), more than the {limit} an image may have "
        "(Pillow's decompression-bomb limit, PIL.Image.MAX_IMAGE_PIXELS); expected a smaller image (resize it first)"
    )


def decode(data: bytes, size: tuple[int, int] | None, *, where: str) -> np.ndarray:
    """One image's bytes as ``[H, W, 3]`` uint8 (resized to ``size`` = (h, w) when given). The size its header
    declares is checked against :func:`pixel_limit` before a pixel is decoded."""
    limit = pixel_limit()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                width, height = img.size
                if width * height > limit:
                    raise _too_large(where, width, height, limit)
                img.load()
                rgb = img.convert("RGB")
        if size is not None and rgb.size != (size[1], size[0]):
            rgb = rgb.resize((size[1], size[0]), Image.Resampling.BILINEAR)
        return np.asarray(rgb, dtype=np.uint8)
    except ConfigError:
        raise  # the size check's own error (a ValueError too)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:  # Pillow's check, in open()
        raise fail(
            f"{where}: {exc} (Pillow's decompression-bomb limit, PIL.Image.MAX_IMAGE_PIXELS = {limit}); "
            "expected a smaller image"
        ) from None
    except (OSError, ValueError, SyntaxError):
        raise fail(f"{where}: not a readable image (damaged, truncated or of an unknown format)") from None


class ImageStack:
    """Decoded images written into one preallocated ``[N, H, W, 3]`` uint8 array."""

    def __init__(self, count: int, size: tuple[int, int] | None):
        self.count = count
        self.size = size
        self.array: np.ndarray | None = None
        self.first = ""

    def put(self, i: int, data: bytes, *, where: str) -> None:
        pixels = decode(data, self.size, where=where)
        if self.array is None:
            self.array = np.empty((self.count, *pixels.shape), dtype=np.uint8)
            self.first = f"{where} is {pixels.shape[0]}x{pixels.shape[1]}"
        elif pixels.shape != self.array.shape[1:]:
            raise fail(
                f"{where}: images differ in size ({self.first}, this one is {pixels.shape[0]}x{pixels.shape[1]}); "
                "give image_size (an int or [height, width]) to resize them"
            )
        self.array[i] = pixels

    def result(self, flatten: bool) -> np.ndarray:
        array = self.array if self.array is not None else np.empty((0, 0, 0, 3), dtype=np.uint8)
        return array.reshape(len(array), -1) if flatten else array


def _is_image(p: Path) -> bool:
    return p.suffix.lower() in IMAGE_EXTENSIONS and not p.name.startswith(".") and p.is_file()


def _folders(path: Path) -> list[Path]:
    return sorted((p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")), key=lambda p: p.name)


def is_image_folder(path: Path) -> bool:
    """Whether ``path`` is laid out as ``<class>/<image>`` or ``<split>/<class>/<image>``."""
    for folder in _folders(path):
        if any(_is_image(p) for p in folder.iterdir()):
            return True
        if folder.name in SPLIT_NAMES and any(any(_is_image(p) for p in c.iterdir()) for c in _folders(folder)):
            return True
    return False


def _layout(path: Path) -> dict[str, Path]:
    folders = _folders(path)
    names = {f.name for f in folders}
    if names and names <= set(SPLIT_NAMES) and all(not any(_is_image(p) for p in f.iterdir()) for f in folders):
        return {f.name: f for f in sorted(folders, key=lambda f: SPLIT_NAMES.index(f.name))}
    return {"all": path}


def read_image_folder(path: Path, *, image_size=None, flatten: bool = False) -> DataSet:
    """An image folder as a :class:`DataSet`."""
    size = image_size_hw(image_size)
    digest = Digest(path)
    layout = _layout(path)
    files: dict[str, list[tuple[Path, str]]] = {}
    for split, root in layout.items():
        entries = []
        for folder in _folders(root):
            name = text(folder.name, where=f"{folder}: class folder name")
            images = sorted((p for p in folder.iterdir() if _is_image(p)), key=lambda p: p.name)
            if not images:
                raise fail(
                    f"{folder}: class folder {name!r} holds no images; expected files ending in "
                    f"{', '.join(IMAGE_EXTENSIONS)}"
                )
            entries += [(p, name) for p in images]
        files[split] = entries
    flat = [entry for entries in files.values() for entry in entries]
    stack = ImageStack(len(flat), size)
    for i, (p, _) in enumerate(flat):
        try:
            data = p.read_bytes()
        except OSError:
            raise fail(f"{p}: cannot be read; expected a readable image file") from None
        stack.put(i, data, where=str(p))
        digest.add(p)
    pixels = stack.result(flatten)
    feats, labs = {}, {}
    start = 0
    for split, entries in files.items():
        feats[split] = pixels[start : start + len(entries)]
        labs[split] = np.array([c for _, c in entries], dtype=str)
        start += len(entries)
    classes = sorted({text(f.name, where=str(f)) for root in layout.values() for f in _folders(root)})
    ids = {s: np.searchsorted(np.array(classes, dtype=str), lab) for s, lab in labs.items()}
    return make_dataset(path=path, fmt="image_folder", features=feats, labels=ids, digest=digest, classes=classes)

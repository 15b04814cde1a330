"""Reading an image a dataset names, as every reader must: a regular file (a FIFO
would block the reader, a device never end), of bounded size, decoded only
once its header says its pixels are within bounds (a decompression bomb is a
small file that decodes to gigabytes). Failures are one line naming the file."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import Any

from rosetrain.core.errors import RosetrainError

MAX_IMAGE_BYTES = 64 << 20  # a ROSE image is well under 1 MB
MAX_IMAGE_PIXELS = 40_000_000  # about 6,300 x 6,300: far above any grid, far below a bomb


def image_bytes(path: str | os.PathLike, where: str) -> bytes:
    """The bytes of the image file at ``path``: a regular file of at most
    ``MAX_IMAGE_BYTES`` (opened without waiting on a FIFO)."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise RosetrainError(f"{where}: cannot read image {path} ({err.strerror})") from None
    _check_regular(handle, path, where)
    with open(handle, "rb", buffering=0) as file:
        try:
            return file.readall()
        except OSError as err:
            raise RosetrainError(f"{where}: cannot read image {path} ({err.strerror})") from None


def _check_regular(handle: int, path: str | os.PathLike, where: str) -> None:
    """A regular file within the size limit; else the descriptor is closed and an error raised."""
    status = os.fstat(handle)
    what = None
    if not stat.S_ISREG(status.st_mode):
        what = "is not a regular file (a folder, FIFO, device or socket)"
    elif status.st_size > MAX_IMAGE_BYTES:
        what = f"is {status.st_size:,} bytes, over the limit of {MAX_IMAGE_BYTES:,}"
    if what is None:
        return
    os.close(handle)
    raise RosetrainError(f"{where}: image {path} {what}")


def open_rgb(path: str | os.PathLike, where: str) -> Any:
    """The image at ``path`` as an RGB ``PIL.Image``, decoded only when its size
    is at most ``MAX_IMAGE_PIXELS``."""
    from PIL import Image

    data = image_bytes(path, where)
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if width * height > MAX_IMAGE_PIXELS:
                raise RosetrainError(
                    f"{where}: image {path} is {width:,} x {height:,} pixels, over the limit of "
                    f"{MAX_IMAGE_PIXELS:,} (a decompression bomb?)"
                )
            return image.convert("RGB")
    except Image.DecompressionBombError:
        raise RosetrainError(
            f"{where}: image {path} decodes to too many pixels (a decompression bomb?)"
        ) from None
    except (OSError, ValueError, SyntaxError) as err:  # not an image, truncated, corrupt
        raise RosetrainError(f"{where}: cannot read image {Path(path)}: {str(err)[:200]}") from None

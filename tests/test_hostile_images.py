"""Every reader of a dataset's images (preview, the runners of eval and signal)
opens them through rosetrain.core.images: a FIFO is refused without blocking, a
decompression bomb before it is decoded, each in one line naming the image."""

from __future__ import annotations

import json
import os
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from rosetrain.cli import main as cli_main
from rosetrain.core.errors import RosetrainError
from rosetrain.core.images import MAX_IMAGE_PIXELS, open_rgb


def png_header_only(path: Path, width: int, height: int) -> None:
    """A tiny PNG file whose header claims ``width`` x ``height`` pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)))


@pytest.mark.parametrize("size", [(7_000, 7_000), (30_000, 30_000)])  # ours, then PIL's own limit
def test_a_decompression_bomb_is_refused_before_it_is_decoded(tmp_path, size):
    bomb = tmp_path / "bomb.png"
    png_header_only(bomb, *size)
    assert size[0] * size[1] > MAX_IMAGE_PIXELS
    with pytest.raises(RosetrainError, match=r"^item x: image .*bomb.png .*(pixels|decompression bomb)"):
        open_rgb(bomb, "item x")


def test_a_fifo_or_a_folder_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo.png"
    os.mkfifo(fifo)
    with pytest.raises(RosetrainError, match="is not a regular file"):
        open_rgb(fifo, "item x")
    with pytest.raises(RosetrainError, match="is not a regular file"):
        open_rgb(tmp_path, "item x")
    (tmp_path / "junk.png").write_bytes(b"not an image")
    with pytest.raises(RosetrainError, match="cannot read image .*junk.png"):
        open_rgb(tmp_path / "junk.png", "item x")


@pytest.fixture
def hostile_split(tmp_path, smoke_split) -> tuple[Path, Path]:
    """A one-scene split whose image is then made hostile; the image's path."""
    split = smoke_split(tmp_path / "split", scenes=1)
    record = json.loads((split / "metadata_test.jsonl").read_text().splitlines()[0])
    return split, split / record["image"]


def _make(image: Path, kind: str) -> None:
    image.unlink()
    if kind == "fifo":
        os.mkfifo(image)
    else:
        png_header_only(image, 30_000, 30_000)


@pytest.mark.parametrize("kind", ["fifo", "bomb"])
@pytest.mark.parametrize("command", ["preview", "eval", "signal"])
def test_commands_refuse_a_hostile_image_in_one_line(
    hostile_split, tmp_path, tiny_model_dir, capsys, kind, command
):
    split, image = hostile_split
    _make(image, kind)
    argv = {
        "preview": ["preview", str(split), "--out", str(tmp_path / "sheet.png")],
        "eval": [
            "eval",
            "--model",
            str(tiny_model_dir),
            "--data",
            str(split),
            "--out",
            str(tmp_path / "run"),
        ],
        "signal": ["signal", "--model", str(tiny_model_dir), "--data", str(split), "--k", "2"],
    }[command]
    code = cli_main(argv)
    err = capsys.readouterr().err
    if command == "eval" and code == 0:  # eval records a failed item and goes on: the error is the row's
        rows = [
            json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()
        ]
        errors = [row["error"] for row in rows if row.get("error")]
        assert errors and all(image.name in e for e in errors), rows
        return
    errors = [line for line in err.splitlines() if "error:" in line]  # progress bars aside
    assert code == 2 and len(errors) == 1 and err.rstrip().endswith(errors[0]), err
    assert image.name in err and ("not a regular file" in err or "bomb" in err), err
    assert not (tmp_path / "sheet.png").exists()
    shutil.rmtree(tmp_path / "run", ignore_errors=True)

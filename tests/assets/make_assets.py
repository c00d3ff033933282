"""Regenerate the small media files in tests/assets (run once; the outputs are committed).

    .venv/bin/python tests/assets/make_assets.py

Needs DejaVu fonts, espeak-ng and sox (Debian: fonts-dejavu-core espeak-ng sox). Oversized files are
not stored here; tests build those in a tmp dir.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

HERE = Path(__file__).resolve().parent
ORDER_TEXT = "ORDER NW-104233 where is my parcel"
SPEECH_TEXT = "how do I reset my password"


def _font(size: int):
    for candidate in ("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
                      "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"):
        if Path(candidate).is_file():
            return ImageFont.truetype(candidate, size)
    return ImageFont.load_default(size=size)


def order_screenshot() -> None:
    font = _font(48)
    left, top, right, bottom = ImageDraw.Draw(Image.new("RGB", (1, 1))).textbbox((0, 0), ORDER_TEXT, font=font)
    image = Image.new("RGB", (right - left + 80, bottom - top + 100), "white")
    ImageDraw.Draw(image).text((40 - left, 50 - top), ORDER_TEXT, fill="black", font=font)
    image.save(HERE / "order_text.png", optimize=True)


def blank_image() -> None:
    Image.new("RGB", (320, 200), (200, 220, 240)).save(HERE / "no_text.png")


def fake_png() -> None:
    (HERE / "not_an_image.png").write_text("This is a text file that someone renamed to .png\n")


def corrupt_png() -> None:
    """A real PNG cut off in the middle of its pixel data, as an interrupted upload leaves it."""
    with tempfile.TemporaryDirectory() as tmp:
        full = Path(tmp) / "full.png"
        Image.effect_noise((400, 300), 60).convert("RGB").save(full)
        data = full.read_bytes()
    (HERE / "corrupt.png").write_bytes(data[: len(data) // 3])


def speech() -> None:
    if not (shutil.which("espeak-ng") and shutil.which("sox")):
        raise SystemExit("espeak-ng and sox are needed to regenerate speech.wav")
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.wav"
        subprocess.run(["espeak-ng", "-s", "140", "-w", str(raw), SPEECH_TEXT], check=True)
        subprocess.run(["sox", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(HERE / "speech.wav")],
                       check=True)


def empty_audio() -> None:
    (HERE / "empty.wav").write_bytes(b"")


def unknown_codec_wav() -> None:
    """A well-formed WAV header that declares a codec id no decoder knows (0x7A7A), then noise."""
    payload = bytes(range(256)) * 64
    fmt = struct.pack("<HHIIHH", 0x7A7A, 1, 16000, 32000, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(payload)) + payload
    (HERE / "unknown_codec.wav").write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)


if __name__ == "__main__":
    for make in (order_screenshot, blank_image, fake_png, corrupt_png, speech, empty_audio, unknown_codec_wav):
        make()
    for path in sorted(HERE.iterdir()):
        if path.suffix != ".py":
            print(f"{path.name:22} {path.stat().st_size:>8} bytes")

"""Voice messages to text: real PyAV decoding and real Whisper base on small files (tests/assets)."""

from __future__ import annotations

import subprocess
import tracemalloc
import wave
from pathlib import Path

import pytest

from app import media
from app.audio import SAMPLE_RATE, probe_duration
from app.media import AttachmentError

ASSETS = Path(__file__).resolve().parents[1] / "assets"


MAX_MB, MAX_S = 10.0, 120.0


@pytest.fixture(scope="module")
def reader(settings):
    return media.MediaReader(settings)


def _silence(path, seconds: float) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes(b"\x00\x00" * int(16000 * seconds))


@pytest.mark.slow
def test_whisper_transcribes_the_question(reader):
    text = reader.transcribe(ASSETS / "speech.wav").lower()
    assert "reset" in text and "password" in text


def test_zero_byte_audio():
    with pytest.raises(AttachmentError, match="empty.wav is empty"):
        media.load_audio(ASSETS / "empty.wav", MAX_MB, MAX_S)


def test_unknown_codec_is_refused():
    with pytest.raises(AttachmentError, match="unknown_codec.wav is not audio I can play"):
        media.load_audio(ASSETS / "unknown_codec.wav", MAX_MB, MAX_S)


def test_garbage_named_mp3(tmp_path):
    fake = tmp_path / "voice.mp3"
    fake.write_bytes(b"definitely not an mp3 " * 200)
    with pytest.raises(AttachmentError, match="voice.mp3 is not audio I can play"):
        media.load_audio(fake, MAX_MB, MAX_S)


def test_image_named_wav_is_not_audio(tmp_path):
    renamed = tmp_path / "voice.wav"
    renamed.write_bytes((ASSETS / "order_text.png").read_bytes())
    with pytest.raises(AttachmentError, match="voice.wav is not audio I can play"):
        media.load_audio(renamed, MAX_MB, MAX_S)


def test_over_long_audio_uses_the_setting(settings):
    short = media.MediaReader(settings.model_copy(update={"max_audio_s": 1.0}))
    with pytest.raises(AttachmentError, match=r"speech.wav is \d s long; voice messages can be at most 1 s"):
        short.transcribe(ASSETS / "speech.wav")


def test_click_length_audio_is_too_short(tmp_path):
    _silence(tmp_path / "click.wav", 0.1)
    with pytest.raises(AttachmentError, match="too short"):
        media.load_audio(tmp_path / "click.wav", MAX_MB, MAX_S)


def test_decoded_audio_is_16k_mono():
    audio = media.load_audio(ASSETS / "speech.wav", MAX_MB, MAX_S)
    assert audio.dtype.name == "float32" and audio.ndim == 1
    assert 1.0 < len(audio) / SAMPLE_RATE < 5.0


@pytest.mark.slow
def test_one_message_with_good_and_bad_files(reader):
    got = reader.extract([ASSETS / "speech.wav", ASSETS / "corrupt.png", ASSETS / "empty.wav", "contract.pdf"])
    assert len(got.heard) == 1 and "password" in got.heard[0].lower() and got.read == []
    assert [e.split(" ")[0] for e in got.errors] == ["corrupt.png", "empty.wav", "contract.pdf:"]
    assert got.modality("") == "audio+image" and got.modality("hi") == "text+audio+image"


def _streamed_flac(path: Path, source: list[str], effects: tuple[str, ...] = ()) -> Path:
    """A FLAC as a recorder writing to a pipe leaves it: sox reads raw samples from a pipe, so it cannot know the
    length, and the STREAMINFO header says 0 samples (the container declares no duration)."""
    raw = subprocess.run(["sox", *source, "-r", "16000", "-c", "1", "-b", "16", "-e", "signed", "-t", "raw", "-",
                          *effects], check=True, capture_output=True).stdout
    encoded = subprocess.run(["sox", "-t", "raw", "-r", "16000", "-e", "signed", "-b", "16", "-c", "1", "-",
                              "-t", "flac", "-"], input=raw, check=True, capture_output=True).stdout
    path.write_bytes(encoded)
    assert probe_duration(path) is None  # what the tests below rely on
    return path


def test_audio_that_declares_no_length_is_decoded_whole_when_short(tmp_path):
    streamed = _streamed_flac(tmp_path / "voice.flac", [str(ASSETS / "speech.wav")])
    audio = media.load_audio(streamed, MAX_MB, MAX_S)
    with wave.open(str(ASSETS / "speech.wav")) as original:
        assert len(audio) == original.getnframes()


def test_audio_that_declares_no_length_is_refused_once_decoding_passes_the_limit(tmp_path):
    """20 minutes in a 7 MB file against a 5 s limit: decoding stops after ~5 s of samples, so memory stays far
    below the 20 minutes (~115 MB as int16 plus float32) that decoding it whole would hold."""
    long = _streamed_flac(tmp_path / "long.flac", ["-n"], ("synth", "1200", "sine", "300", "vol", "0.1"))
    assert long.stat().st_size < MAX_MB * 1024 * 1024
    tracemalloc.start()
    try:
        with pytest.raises(AttachmentError, match="long.flac is longer than 5 s; voice messages can be at most 5 s"):
            media.load_audio(long, MAX_MB, 5.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, peak

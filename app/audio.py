"""Voice messages to samples: the declared length read from the header, then a decode that stops at the length limit
(a file that declares no length is decoded frame by frame and refused as soon as it passes it)."""

from __future__ import annotations

from pathlib import Path

from app.attachment import AttachmentError, check_size

SAMPLE_RATE = 16_000
# Shorter than this is a click, not a question.
MIN_AUDIO_S = 0.3


def probe_duration(path: Path) -> float | None:
    """Container-declared duration in seconds, read from the header (no decoding); None if unknown."""
    import av

    with av.open(str(path)) as container:
        if container.duration:
            return container.duration / 1_000_000
        for stream in container.streams.audio:
            if stream.duration and stream.time_base:
                return float(stream.duration * stream.time_base)
    return None


def _too_long(name: str, max_s: float, seconds: float | None = None) -> AttachmentError:
    length = f"{seconds:.0f} s long" if seconds is not None else f"longer than {max_s:.0f} s"
    return AttachmentError(f"{name} is {length}; voice messages can be at most {max_s:.0f} s. "
                           "Please send a shorter one.")


def decode_capped(path: Path, max_s: float):
    """Decode to 16 kHz mono float32, frame by frame, and stop with the "too long" error as soon as the decoded
    length passes ``max_s`` (+0.5 s of slack), whatever the container declares (or does not: a FLAC written to a
    pipe carries no length). Memory stays bounded by the limit: a 10 MB file that would decode to hours of samples
    is refused after ``max_s`` of them. The same PyAV steps as faster-whisper's ``decode_audio`` (resampled to s16
    mono, timestamps ignored, undecodable packets skipped), with the count kept along the way."""
    import gc

    import av
    import numpy as np

    limit = int((max_s + 0.5) * SAMPLE_RATE)
    resampler = av.audio.resampler.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
    chunks: list[np.ndarray] = []
    total = 0
    try:
        with av.open(str(path), mode="r", metadata_errors="ignore") as container:
            for frame in _audio_frames(container):
                for out in resampler.resample(frame):
                    samples = out.to_ndarray().reshape(-1)
                    total += len(samples)
                    chunks.append(samples)
                if total > limit:
                    raise _too_long(path.name, max_s)
    finally:
        del resampler
        gc.collect()  # PyAV's resampler keeps buffers until collected (faster-whisper issue 390)
    pcm = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int16)
    return pcm.astype(np.float32) / 32768.0


def _audio_frames(container):
    """The first audio stream's frames as they are decoded, then None (which drains the resampler)."""
    import av

    stream = container.streams.audio[0]  # IndexError: no audio stream
    decoded = failures = 0
    for packet in container.demux(stream):  # ends with an empty packet that drains the decoder
        try:
            frames = packet.decode()
        except av.InvalidDataError:  # one damaged packet; faster-whisper skips those too
            failures += 1
            continue
        for frame in frames:
            decoded += 1
            frame.pts = None
            yield frame
    if failures and not decoded:
        raise av.InvalidDataError(0, "no packet could be decoded")
    yield None


def load_audio(path: str | Path, max_mb: float, max_s: float):
    """Decode to 16 kHz mono float32 with PyAV; checks size, codec and declared length first, and the decoded length
    as it goes (:func:`decode_capped`)."""
    import av

    path = Path(path)
    check_size(path, max_mb)
    name = path.name
    unreadable = (f"{name} is not audio I can play (unknown or unsupported format). "
                  "Please record again or send WAV, MP3 or OGG.")
    try:
        declared = probe_duration(path)
        if declared is not None and declared > max_s + 0.5:
            raise _too_long(name, max_s, declared)
        audio = decode_capped(path, max_s)
    except AttachmentError:
        raise
    except (av.FFmpegError, OSError, ValueError, IndexError, StopIteration, RuntimeError):
        # PyAV raises InvalidDataError for garbage, and a container without an audio stream has no
        # streams.audio[0] (IndexError); all mean "not usable audio".
        raise AttachmentError(unreadable) from None
    seconds = len(audio) / SAMPLE_RATE
    if seconds > max_s + 0.5:
        raise _too_long(name, max_s, seconds)
    if seconds < MIN_AUDIO_S:
        raise AttachmentError(f"{name} is too short to contain speech ({seconds:.1f} s); please record again.")
    return audio

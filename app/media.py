"""Attachments to text: OCR for images, speech-to-text for voice messages.

Every reader returns the text it found or raises :class:`AttachmentError` whose message is shown to
the customer as is (one sentence that names the file and what to do). A :class:`MediaReader` owns the
OCR and Whisper models; they load on first use or from :meth:`MediaReader.warm_up`, never at import.
"""

from __future__ import annotations

import os
import tempfile
import threading
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from app.attachment import AttachmentError, check_size
from app.audio import load_audio
from chains.schema import PhotoRead
from core.errors import TandemError
from core.model_files import model_path
from core.settings import Settings

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp", ".tif", ".tiff"})
AUDIO_SUFFIXES = frozenset({".wav", ".mp3", ".ogg", ".oga", ".opus", ".flac", ".m4a", ".aac", ".webm",
                            ".mp4", ".mpeg", ".mpga"})
# A decompression bomb is a tiny file that expands to gigabytes of pixels; a phone photo is ~12 MP.
MAX_IMAGE_PIXELS = 40_000_000
# OCR cost grows with pixels; shrinking the long side to this keeps a screenshot legible and fast.
OCR_MAX_SIDE = 2000


def gradio_upload_folder() -> Path:
    """Where the chat UI's uploads land: Gradio's upload folder (``gradio.utils.get_upload_folder``, repeated here so
    reading a file does not import Gradio)."""
    return Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio").resolve()


@dataclass
class Extraction:
    """What one message's attachments yielded: usable text, customer-facing errors, and the kinds seen."""

    texts: list[str] = field(default_factory=list)
    heard: list[str] = field(default_factory=list)     # transcripts ("I heard: ...")
    read: list[str] = field(default_factory=list)      # OCR text ("I read: ...")
    errors: list[str] = field(default_factory=list)
    kinds: set[str] = field(default_factory=set)
    photos: list[PhotoRead] = field(default_factory=list)  # each image's barcodes and OCR text (product look-up)

    def modality(self, typed_text: str) -> str:
        parts = (["text"] if typed_text.strip() else []) + sorted(self.kinds)
        return "+".join(parts) or "text"


def kind_of(path: str | Path) -> str:
    """'image', 'audio', or raise for any other type (decided by the name; the readers check content)."""
    suffix = Path(path).suffix.lower()
    if suffix in IMAGE_SUFFIXES:
        return "image"
    if suffix in AUDIO_SUFFIXES:
        return "audio"
    label = suffix or "without an extension"
    raise AttachmentError(f"{Path(path).name}: files of type {label} are not supported; "
                          "please send a photo/screenshot (PNG, JPEG, WebP) or a voice message (WAV, MP3, OGG).")


# --- images -------------------------------------------------------------------------------

def _load_ocr():
    from rapidocr_onnxruntime import RapidOCR

    try:
        return RapidOCR()
    except Exception as exc:
        raise TandemError(f"the OCR engine failed to load ({exc.__class__.__name__}: {exc}). "
                          "Fix: .venv/bin/pip install --force-reinstall rapidocr-onnxruntime==1.4.4") from exc


def load_image(path: str | Path, max_mb: float):
    """Open and fully validate an image with Pillow; returns an RGB ``PIL.Image``."""
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    check_size(path, max_mb)
    name = path.name
    with warnings.catch_warnings():
        # Pillow warns (then errors) on huge images; we apply our own, lower limit with a clear message.
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            with Image.open(path) as probe:
                width, height = probe.size
                if width * height > MAX_IMAGE_PIXELS:
                    raise AttachmentError(
                        f"{name} is {width}x{height} pixels ({width * height / 1e6:.0f} MP); the limit is "
                        f"{MAX_IMAGE_PIXELS / 1e6:.0f} MP. Please send a smaller screenshot or photo.")
                probe.verify()  # checks the structure and checksums without decoding all pixels
            with Image.open(path) as image:
                image.load()
                return image.convert("RGB")
        except AttachmentError:
            raise
        except UnidentifiedImageError:
            raise AttachmentError(f"{name} is not an image I can read (the content is not PNG, JPEG, WebP, "
                                  "GIF or BMP, whatever its name says). Please send a real photo or screenshot."
                                  ) from None
        except Image.DecompressionBombError:
            raise AttachmentError(f"{name} is far too large in pixels; please send a smaller image.") from None
        except (OSError, SyntaxError, ValueError, EOFError) as exc:
            # Pillow reports truncated and corrupt files as OSError/SyntaxError from verify() or load().
            raise AttachmentError(f"{name} looks damaged and cannot be opened ({_short(exc)}). "
                                  "Please take the screenshot again.") from None


class NothingRead(AttachmentError):
    """A photo with neither a barcode nor any text: the customer reads why, and the photo (its small copy) still goes
    with the request, for the catalog to say it found no product and hand the photo to a person."""

    def __init__(self, message: str, photo: PhotoRead):
        super().__init__(message)
        self.photo = photo


THUMBNAIL_SIDE = 320  # the long side of the copy a handoff packet keeps (an operator sees what was sent, no more)


def thumbnail(image) -> str:
    """A small JPEG copy of ``image`` as a data URL."""
    import base64
    import io

    copy = image.copy()
    copy.thumbnail((THUMBNAIL_SIDE, THUMBNAIL_SIDE))
    buffer = io.BytesIO()
    copy.convert("RGB").save(buffer, format="JPEG", quality=70)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()


def ocr_text(boxes: list) -> str:
    """Join RapidOCR boxes ``[corners, text, score]`` into lines, in reading order.

    The detector sometimes returns neighbouring word boxes that overlap by a glyph, and both boxes
    then contain that glyph ("where is" + "s my parcel"); the overlap is cut from the later box in
    proportion to its width, which removes the echo without dropping real characters.
    """
    items = []
    for corners, text, _score in boxes:
        xs = [point[0] for point in corners]
        ys = [point[1] for point in corners]
        if str(text).strip():
            items.append((min(xs), max(xs), min(ys), max(ys), str(text)))
    items.sort(key=lambda item: ((item[2] + item[3]) / 2, item[0]))
    lines: list[list[tuple]] = []
    for item in items:
        line = lines[-1] if lines else None
        if line and _same_line(line[-1], item):
            line.append(item)
        else:
            lines.append([item])
    out = []
    for line in lines:
        line.sort(key=lambda item: item[0])
        words, right_edge = [], None
        for left, right, _top, _bottom, text in line:
            if right_edge is not None and left < right_edge and len(text) > 1:
                per_char = (right - left) / len(text)
                text = text[min(len(text) - 1, round((right_edge - left) / per_char)):]
            words.append(text.strip())
            right_edge = right if right_edge is None else max(right_edge, right)
        out.append(" ".join(word for word in words if word))
    return "\n".join(" ".join(line.split()) for line in out if line.strip())


def _same_line(a: tuple, b: tuple) -> bool:
    overlap = min(a[3], b[3]) - max(a[2], b[2])
    return overlap > 0.5 * min(a[3] - a[2], b[3] - b[2])


# The symbologies on retail products: EAN-13/8 and UPC-A/E (GTIN-8/12/13).
_RETAIL = "EAN13|EAN8|UPCA|UPCE"
# When no barcode is read as the photo is, it is read again turned by these angles (degrees), then sharpened and turned
# in finer steps: zxing-cpp reads 1D codes along image rows (and tries 90-degree turns itself), and a code photographed
# aslant and at an angle reads far better once its bars stand upright. On the rendered photo set (offline/photo_eval.py)
# the first pass alone read 75 of 156, the turns 125, the sharpened turns 152.
_TURNS = tuple(a for a in range(-45, 50, 5) if a)
_FINE_TURNS = tuple(a for a in range(-45, 48, 3))


def read_barcodes(image) -> list[str]:
    """The EAN/UPC barcodes in a PIL image, as digit strings (UPC-A as its 12 digits), first read first; [] when
    there is none. zxing-cpp decodes; a photo it cannot read as it is gets turned, then sharpened and turned."""
    import zxingcpp
    from PIL import Image, ImageFilter, ImageOps

    formats = zxingcpp.barcode_formats_from_str(_RETAIL)
    gray = ImageOps.grayscale(image)

    def decode(candidate, angle: int = 0) -> list[str]:
        if angle:
            candidate = candidate.rotate(angle, expand=True, fillcolor=255, resample=Image.Resampling.BICUBIC)
        found = zxingcpp.read_barcodes(candidate, formats=formats, try_rotate=True, try_downscale=True)
        return list(dict.fromkeys(r.text for r in found if r.valid and r.text.isdigit()))

    for angle in (0, *_TURNS):
        if codes := decode(gray, angle):
            return codes
    sharp = gray.filter(ImageFilter.UnsharpMask(radius=2, percent=200, threshold=0))
    for angle in _FINE_TURNS:
        if codes := decode(sharp, angle):
            return codes
    return []


# --- audio --------------------------------------------------------------------------------

def _load_whisper(models_dir: Path):
    from faster_whisper import WhisperModel

    path = model_path("whisper-base", models_dir)
    try:
        return WhisperModel(str(path), device="cpu", compute_type="int8")
    except Exception as exc:
        raise TandemError(f"Whisper failed to load from {path} ({exc.__class__.__name__}). "
                          "Fix: delete that folder and restart; it is re-joined from the wheels") from exc


class MediaReader:
    """Reads one message's attachments: OCR for images, Whisper for voice; models load once, on first use."""

    def __init__(self, settings: Settings, upload_folders: Sequence[str | Path] | None = None):
        # Uploads are personal data: :meth:`extract` deletes each file in these folders once it has been read (or
        # refused). Files elsewhere (a path an operator's test names, the repo's assets) are never touched.
        self.upload_folders = [Path(folder).resolve() for folder in
                               (upload_folders if upload_folders is not None else [gradio_upload_folder()])]
        self.max_mb, self.max_audio_s = settings.max_upload_mb, settings.max_audio_s
        self.models_dir = settings.models_dir  # Whisper is joined there from its wheels on first use
        self._ocr = None
        self._whisper = None
        self._load_lock = threading.Lock()
        # onnxruntime sessions are not documented as safe for concurrent calls; OCR is short, so serialise it.
        self._ocr_lock = threading.Lock()
        # One transcription already uses every core; a second in parallel only makes both slower.
        self._whisper_lock = threading.Lock()

    def ocr_engine(self):
        with self._load_lock:
            if self._ocr is None:
                self._ocr = _load_ocr()
            return self._ocr

    def whisper(self):
        with self._load_lock:
            if self._whisper is None:
                self._whisper = _load_whisper(self.models_dir)
            return self._whisper

    def read_image(self, path: str | Path) -> str:
        """OCR text of an image, in reading order; raises AttachmentError when there is none."""
        return self._ocr_image(load_image(path, self.max_mb), path)

    def read_photo(self, path: str | Path) -> PhotoRead:
        """An image's barcodes and OCR text, for a product look-up, with a small copy of it; raises AttachmentError
        when it cannot be opened, and :class:`NothingRead` (which carries the photo) when it has neither."""
        image = load_image(path, self.max_mb)
        try:
            codes = read_barcodes(image)
        except ImportError:  # the decoder is not installed: the label's text still serves
            codes = []
        photo = PhotoRead(codes=codes, name=Path(path).name, thumbnail=thumbnail(image))
        try:
            photo.text = self._ocr_image(image, path)
        except AttachmentError as exc:
            if not codes:
                raise NothingRead(str(exc), photo) from None
        return photo

    def _ocr_image(self, image, path: str | Path) -> str:
        if max(image.size) > OCR_MAX_SIDE:
            image.thumbnail((OCR_MAX_SIDE, OCR_MAX_SIDE))
        engine = self.ocr_engine()
        try:
            with self._ocr_lock:
                result, _elapsed = engine(image)
        except Exception as exc:  # a model-side failure on one odd image must not break the chat
            raise AttachmentError(f"I could not read the text in {Path(path).name} ({_short(exc)}).") from None
        text = ocr_text(result or [])
        if not text:
            raise AttachmentError(f"I could not find any text in {Path(path).name}. I can read screenshots, "
                                  "labels and receipts; please type your question too.")
        return text

    def transcribe(self, path: str | Path) -> str:
        """Speech to text of a voice message; raises AttachmentError when nothing was said."""
        audio = load_audio(path, self.max_mb, self.max_audio_s)
        model = self.whisper()
        try:
            with self._whisper_lock:
                segments, _info = model.transcribe(audio, beam_size=1, vad_filter=False,
                                                   condition_on_previous_text=False)
                text = " ".join(segment.text.strip() for segment in segments).strip()
        except Exception as exc:
            raise AttachmentError(f"I could not transcribe {Path(path).name} ({_short(exc)}).") from None
        if not text:
            raise AttachmentError(f"I could not hear any words in {Path(path).name}; please speak closer to the "
                                  "microphone or type your question.")
        return text

    def read_attachment(self, path: str | Path) -> tuple[str, str]:
        """(kind, text) for one file; raises AttachmentError."""
        kind = kind_of(path)
        return kind, (self.read_image(path) if kind == "image" else self.transcribe(path))

    def read_file(self, path: str | Path) -> tuple[str, str, PhotoRead | None]:
        """(kind, text, photo) for one file: an image's barcodes and OCR text as ``photo`` (its text also as
        ``text``), a voice message's transcript as ``text``; raises AttachmentError."""
        kind = kind_of(path)
        if kind == "image":
            photo = self.read_photo(path)
            return kind, photo.text, photo
        return kind, self.transcribe(path), None

    def read_and_delete(self, paths: Iterable[str | Path]) -> tuple[list[str], list[PhotoRead], list[str]]:
        """(texts, photos, errors) of the API's uploads, in order: each file read as ``read_file`` reads it, then
        deleted, read or not; ``errors`` holds a customer-facing line for each file that could not be read."""
        texts: list[str] = []
        photos: list[PhotoRead] = []
        errors: list[str] = []
        for path in paths:
            try:
                _kind, text, photo = self.read_file(path)
                if text:
                    texts.append(text)
                if photo is not None:
                    photos.append(photo)
            except AttachmentError as exc:
                errors.append(str(exc))
                if isinstance(exc, NothingRead):  # nothing read, but the catalog may still say so and hand it over
                    photos.append(exc.photo)
            finally:
                Path(path).unlink(missing_ok=True)
        return texts, photos, errors

    def discard(self, path: str | Path) -> bool:
        """Delete an uploaded file (one inside ``upload_folders``) and the folder Gradio made for it if that is now
        empty; returns whether the file was removed. Anything outside those folders is left alone."""
        try:
            resolved = Path(path).resolve()
        except (OSError, RuntimeError):
            return False
        folder = next((f for f in self.upload_folders if resolved != f and resolved.is_relative_to(f)), None)
        if folder is None:
            return False
        try:
            resolved.unlink(missing_ok=True)
        except OSError:
            return False
        parent = resolved.parent
        if parent != folder:
            try:
                parent.rmdir()  # Gradio keeps each upload in a folder named by its hash; gone when empty
            except OSError:
                pass
        return True

    def extract(self, paths: Iterable[str | Path]) -> Extraction:
        """Read every file of one message; one bad file does not spoil the others. Each uploaded file is deleted
        once read or refused (:meth:`discard`): only the text taken from it goes on."""
        out = Extraction()
        for path in paths:
            try:
                self._extract_one(path, out)
            finally:
                self.discard(path)
        return out

    def _extract_one(self, path: str | Path, out: Extraction) -> None:
        try:
            kind = kind_of(path)
            out.kinds.add(kind)
            kind, text, photo = self.read_file(path)
        except AttachmentError as exc:
            out.errors.append(str(exc))
            if isinstance(exc, NothingRead):
                out.photos.append(exc.photo)
            return
        except TandemError as exc:  # OCR or Whisper itself is not available: this file only, said plainly
            what = "read images" if kind_of(path) == "image" else "listen to voice messages"
            out.errors.append(f"I cannot {what} right now, so I could not use {Path(path).name}; please type "
                              f"your question instead. ({str(exc).splitlines()[0][:120]})")
            return
        if photo is not None:
            out.photos.append(photo)
        if text:
            out.texts.append(text)
            (out.read if kind == "image" else out.heard).append(text)

    def warm_up(self) -> list[str]:
        """Load OCR and Whisper now (server start) so the first customer does not wait; returns problems."""
        problems = []
        for loader in (self.ocr_engine, self.whisper):
            try:
                loader()
            except TandemError as exc:
                problems.append(str(exc))
        return problems


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
    return text[:120]

"""The files the viewer writes besides its pages: folders made only inside the pages' folder, and
the screenshots' thumbnails.

A thumbnail costs a PNG decode, a resize and a JPEG encode (~30-40 ms for a 1080x2400 screen on
this project's 2-core machine): a run of 2,000 episodes has 20,000 of them, 12 min 50 s one after
another. So :class:`Thumbnails` makes them either

* **now**, in parallel (``make_all``: threads, Pillow releases the GIL while it decodes, resizes
  and encodes), before the command returns: ``harness view --no-serve`` and :func:`write_viewer`'s
  default, so pages written for reading from disk are complete; or
* **later**: ``harness view`` serves the pages at once and makes the thumbnails in the background
  (``start``: a thread per core, in the pages' order) and, ahead of them, any one a browser asks
  for (``ensure``, called by the viewer's server; the background threads pause while a request is
  making one, so a page's thumbnails come first without giving the machine's other programs less). Until a thumbnail exists, a page
  read from disk shows the full screenshot in its place (viewer.js), so the pages are correct
  offline at any moment, and complete once the background is done.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import posixpath
import re
import threading
import time
from pathlib import Path
from typing import Callable
from urllib.parse import unquote, urlsplit

from harness.records import RecordError, check_inside

THUMB_WIDTH = 240
JPEG_QUALITY = 78


class ViewerError(ValueError):
    """The viewer cannot be written (a folder that cannot be written, or leads out of the run)."""


def make_dir(path: Path, out: Path) -> Path:
    """Create ``path`` under the pages' folder ``out``; refuse one that leads out of it (a symlink
    in a copied run folder must not make the viewer write elsewhere)."""
    try:  # resolving a path not yet made follows the symlinks of the part that exists
        check_inside(out, path)
    except RecordError:
        raise ViewerError(f"{path}: leads out of {out} (a symlink); refusing to write the viewer there") from None
    path.mkdir(parents=True, exist_ok=True)
    return path


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def source_size(src: Path) -> tuple[int, int] | None:
    """The screenshot's size, read from its header alone; None when it is not an image.

    A PNG's size is its first chunk's (IHDR: width and height, 4 bytes big-endian each, right
    after the 8-byte signature and the chunk's length and type; PNG specification, W3C, 2nd ed.,
    sections 5.2 and 11.2.2): 24 bytes read, where opening it with Pillow took 4 to 10 times the
    CPU (0.1-0.2 ms against 0.02-0.03), a quarter of writing a big run's pages. Other images: Pillow."""
    from PIL import Image

    try:
        with open(src, "rb") as f:
            head = f.read(96)
    except OSError:
        return None
    if head[:8] == PNG_SIGNATURE and head[12:16] == b"IHDR":
        w, h = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
        # a screenshot a bundle downscaled says the phone's size in a text chunk right after IHDR
        return noted_size(head[37:41] == b"tEXt" and head[41:96]) or ((w, h) if w > 0 and h > 0 else None)
    try:
        with Image.open(src) as im:
            return im.size
    except (OSError, ValueError):
        return None


SCREEN_SIZE_KEY = "crate-screen-size"  # harness.report.bundle writes it into the screenshots it downscales
_SIZE_NOTE = re.compile(rb"(?:crate-screen-size\x00)?([1-9][0-9]{0,5})x([1-9][0-9]{0,5})")


def noted_size(text: bytes | bool | None) -> tuple[int, int] | None:
    """The phone's screen size a downscaled screenshot carries (``crate-screen-size`` text chunk):
    actions are drawn in the phone's pixels, whatever the image's own size."""
    m = _SIZE_NOTE.match(text) if isinstance(text, bytes) else None
    return (int(m.group(1)), int(m.group(2))) if m else None


def up_to_date(src: Path, dst: Path) -> bool:
    try:
        return dst.stat().st_mtime >= src.stat().st_mtime
    except OSError:
        return False


def make_thumb(src: Path, dst: Path, out: Path) -> tuple[int, int] | None:
    """Write a JPEG thumbnail of ``src`` (unless an up-to-date one exists) at ``dst``, inside the
    pages' folder ``out``; return the source size (None: not a readable image)."""
    from PIL import Image

    try:
        with Image.open(src) as im:
            size = noted_size(im.info.get(SCREEN_SIZE_KEY, "").encode()) or im.size
            if up_to_date(src, dst):
                return size
            im = im.convert("RGB")
            h = max(1, round(size[1] * THUMB_WIDTH / max(1, size[0])))
            im.thumbnail((THUMB_WIDTH, h), Image.Resampling.BILINEAR, reducing_gap=2.0)
            make_dir(dst.parent, out)
            tmp = dst.with_name(f".{dst.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            im.save(tmp, "JPEG", quality=JPEG_QUALITY)
            os.replace(tmp, dst)
            return size
    except (OSError, ValueError):
        return None


def workers() -> int:
    """Threads for making thumbnails: one per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class Thumbnails:
    """The thumbnails the pages under ``out`` show and that are not made (or are older than their
    screenshot): made later, in the background and on request. Keys are paths relative to ``out``."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self._lock = threading.Lock()
        self._todo: dict[str, tuple[Path, Path]] = {}   # key -> (src, dst), in the pages' order
        self._making: dict[str, threading.Event] = {}
        self._asking = 0  # requests making a thumbnail now: the background waits for them
        self._quiet = threading.Condition(self._lock)
        self.made = self.failed = 0
        self.done = threading.Event()
        self.done.set()

    def __len__(self) -> int:
        return len(self._todo) + len(self._making)

    def need(self, src: Path, dst: Path) -> tuple[int, int] | None:
        """The source's size for the page; the thumbnail is queued unless an up-to-date one exists."""
        size = source_size(src)
        if size is not None and not up_to_date(src, dst):
            key = dst.relative_to(self.out).as_posix()
            with self._lock:
                self._todo[key] = (src, dst)
                self.done.clear()
        return size

    def _take(self, key: str | None = None) -> tuple[str, tuple[Path, Path], threading.Event] | None:
        with self._lock:
            if key is None:
                if not self._todo:
                    return None
                key = next(iter(self._todo))
            job = self._todo.pop(key, None)
            if job is None:
                return None
            ev = self._making[key] = threading.Event()
            return key, job, ev

    def _make(self, key: str, job: tuple[Path, Path], ev: threading.Event) -> None:
        ok = make_thumb(job[0], job[1], self.out) is not None
        with self._lock:
            self._making.pop(key, None)
            if ok:
                self.made += 1
            else:
                self.failed += 1
            if not self._todo and not self._making:
                self.done.set()
        ev.set()

    def ensure(self, url_path: str) -> bool:
        """Make the thumbnail a request names now, if it is one of ours not made yet (or wait for
        the thread making it); False when the path names none of them."""
        try:
            key = posixpath.normpath(unquote(urlsplit(url_path).path, errors="strict")).lstrip("/")
        except (UnicodeDecodeError, ValueError):
            return False
        taken = self._take(key)
        if taken is not None:
            with self._lock:
                self._asking += 1
            try:
                self._make(*taken)
            finally:
                with self._lock:
                    self._asking -= 1
                    if not self._asking:
                        self._quiet.notify_all()
            return True
        with self._lock:
            ev = self._making.get(key)
        if ev is None:
            return False
        ev.wait(60)
        return True

    def _work(self, background: bool) -> None:
        while True:
            if background:
                with self._lock:
                    while self._asking:  # a request is making a thumbnail: it goes first
                        self._quiet.wait(1.0)
            taken = self._take()
            if taken is None:
                return
            self._make(*taken)

    def make_all(self, threads: int | None = None) -> None:
        """Every queued thumbnail, on ``threads`` threads (default: one per core); returns when done."""
        n = threads or workers()
        with cf.ThreadPoolExecutor(n, thread_name_prefix="thumbs") as pool:
            for f in [pool.submit(self._work, False) for _ in range(n)]:
                f.result()

    def start(self, threads: int | None = None, on_done: Callable[["Thumbnails", float], None] | None = None) -> None:
        """Make the queued thumbnails in the background (daemon threads, pausing for requests)."""
        n = threads or workers()
        t0 = time.monotonic()

        def run() -> None:
            ts = [threading.Thread(target=self._work, args=(True,), name=f"thumbs-{i}", daemon=True) for i in range(n)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            self.done.wait()
            if on_done is not None:
                on_done(self, time.monotonic() - t0)

        threading.Thread(target=run, name="thumbs", daemon=True).start()

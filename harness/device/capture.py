"""``harness devices capture SERIAL --out DIR``: a phone's answers to every read-only command the
harness sends (``harness.device.read_only_commands``), kept as the phone sent them, in a device
profile folder (``harness.core.profile_folder``) that ``harness sim serve --profile DIR`` serves.

Each answer is written as it arrives: over ``shell:`` as the harness asks (so an old phone's pty
line ends, ``\\r\\n``, are kept), images over ``exec:`` as the harness takes screenshots (only what
comes before the image is kept, a warning for instance, with the image's format and size). Before
anything is written, what identifies the phone or its owner is removed (``harness.device.redaction``:
serial numbers, IMEIs, MAC addresses, accounts, the screen's text); the manifest lists each removal
by file and property or rule. The UI dump writes one file on the phone, under ``/data/local/tmp``,
read back and removed as the harness itself does; nothing else is written, and no setting, app or
input method is touched.

The manifest is rewritten after every answer, so a capture cut short (a cable pulled) keeps what
it had. A command that fails is recorded with its error, and the capture goes on.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Callable

from harness import __version__
from harness.device import focus, getprop, screencap
from harness.device.base import DeviceError, InfraError
from harness.device.read_only_commands import ReadCommand, to_capture
from harness.device.redaction import Redactor, decode, encode
from harness.core.profile_folder import Answer, Manifest, file_for, write_manifest
from harness.records import atomic_write_bytes, now_iso

MAX_HEAD = screencap.MAX_NOISE      # bytes kept of an image answer that holds no image
DEVICE_PROPS = {"model": "ro.product.model", "manufacturer": "ro.product.manufacturer", "brand": "ro.product.brand",
                "product": "ro.product.name", "device": "ro.product.device", "release": "ro.build.version.release",
                "build": "ro.build.id", "display": "ro.build.display.id", "fingerprint": "ro.build.fingerprint",
                "abi": "ro.product.cpu.abi", "hardware": "ro.hardware"}


class CaptureError(RuntimeError):
    """The capture cannot start (a folder that is not empty)."""


def _shell_bytes(device: Any, cmd: ReadCommand) -> bytes:
    """The answer over ``shell:`` byte for byte (``AdbDevice.shell`` decodes and strips it)."""
    try:
        return device.dev.shell(cmd.line, encoding=None, timeout=device.command_timeout)
    except Exception as e:  # adbutils' errors, a dropped connection
        raise InfraError(f"{device.serial}: {cmd.line} failed: {type(e).__name__}: {e}") from None


def _image_answer(device: Any, cmd: ReadCommand, red: Redactor, file: str) -> tuple[bytes, dict[str, Any]]:
    """What an image answer holds before the image, redacted, and the image's format and size."""
    data = device.exec_out(cmd.line)
    head, image = _split_image(device, cmd, data)
    return encode(red.text(decode(head), file)), image


def _split_image(device: Any, cmd: ReadCommand, data: bytes) -> tuple[bytes, dict[str, Any]]:
    if "-p" in cmd.argv:
        at = data.find(screencap.PNG_SIGNATURE, 0, MAX_HEAD + len(screencap.PNG_SIGNATURE))
        if at < 0:
            return data[:MAX_HEAD], {"format": "none", "bytes": len(data)}
        from PIL import Image

        try:
            w, h = Image.open(io.BytesIO(data[at:])).size
        except Exception as e:  # not a PNG after all, or one cut short
            return data[:at], {"format": "png", "bytes": len(data) - at, "error": f"{type(e).__name__}: {e}"[:200]}
        return data[:at], {"format": "png", "width": w, "height": h, "bytes": len(data) - at}
    try:
        frame, _ = screencap.find_raw(data, device.screen_size())
    except (screencap.ScreencapError, DeviceError) as e:
        return data[:MAX_HEAD], {"format": "none", "bytes": len(data), "error": str(e)[:200]}
    header = 12 if frame.colorspace is None else 16
    head = data[:len(data) - header - len(frame.pixels)]
    return head, {"format": "raw", "width": frame.width, "height": frame.height, "pixel_format": frame.format,
                  "header_bytes": header, "bytes": len(data) - len(head)}


def _ui_dump(device: Any, cmd: ReadCommand, out: Path, red: Redactor) -> Answer:
    """``uiautomator dump FILE`` as the harness asks it: the printed answer, and the file it wrote
    (pulled, then removed from the phone)."""
    path = cmd.argv[-1]
    printed = _shell_bytes(device, cmd)
    answer = Answer(cmd.line, cmd.service, file_for(" ".join(cmd.argv[:2])), 0)
    try:
        xml = device.dev.sync.read_bytes(path)
    except Exception as e:
        answer.error = f"the dump's file could not be read: {type(e).__name__}: {e}"
        xml = None
    finally:
        try:
            device.shell(["rm", "-f", path], timeout=5)
        except (InfraError, DeviceError):
            pass
    text = encode(red.text(decode(printed), answer.file))
    atomic_write_bytes(out / answer.file, text, fsync=False)
    answer.bytes = len(text)
    if xml is not None:
        answer.pulled = "uiautomator-dump.xml"
        atomic_write_bytes(out / answer.pulled, encode(red.ui_dump(decode(xml), answer.pulled)), fsync=False)
    return answer


def device_of(props: dict[str, str], answers: dict[str, bytes]) -> dict[str, Any]:
    from harness.device import wm

    info: dict[str, Any] = {k: props.get(p, "") for k, p in DEVICE_PROPS.items()}
    info["sdk"] = getprop.sdk_of(props)
    size = wm.parse_size(decode(answers.get("wm size", b"")))
    info["size"] = list(size) if size else None
    info["density"] = wm.parse_density(decode(answers.get("wm density", b"")))
    return info


def foreground_of(answers: dict[str, bytes], sdk: int | None) -> dict[str, Any]:
    """The app in front per the captured answers (read as the harness reads them), and how the
    answers spell it."""
    def shell(argv: list[str]) -> str:
        return decode(answers.get(" ".join(argv), b"")).rstrip()

    found = focus.foreground(shell, sdk)
    if found is None:
        return {}
    pkg, act = found.package, found.activity
    spellings = [f"{pkg}/{act}"]
    if act.startswith(pkg + "."):
        spellings.append(f"{pkg}/{act[len(pkg):]}")
    return {"package": pkg, "activity": act, "source": found.source,
            "components": [s for s in spellings if any(s.encode() in a for a in answers.values())], "windows": []}


def capture(device: Any, out: Path, *, name: str | None = None,
            say: Callable[[str], None] | None = None) -> Manifest:
    """Ask ``device`` (an ``AdbDevice``) every command of the capture list and write the profile
    folder ``out`` (created; it must be empty). Returns the manifest written."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CaptureError(f"{out}: {'not a folder' if not out.is_dir() else 'not empty'}; give --out a new folder "
                           "(a capture never mixes its answers with another's)")
    out.mkdir(parents=True, exist_ok=True)
    say = say or (lambda line: None)
    red = Redactor()
    serial = device.serial
    if ":" not in serial and not serial.startswith("emulator-"):
        red.add_secret(serial)  # a USB phone's adb serial is its serial number
    manifest = Manifest(name=name or out.name, captured_at=now_iso(), harness_version=__version__, device={},
                        answers=[], redactions=red.records,
                        not_captured=[{"command": c.line, "why": c.why} for c in _not_captured()],
                        notes=["answers are the phone's bytes (line ends, warnings, spacing kept) with the "
                               "redactions listed; image answers keep only the bytes before the image"])
    answers: dict[str, bytes] = {}
    props: dict[str, str] = {}
    for cmd in to_capture():
        say(f"asking {cmd.line}")
        try:
            if cmd.argv[:2] == ("uiautomator", "dump"):
                answer = _ui_dump(device, cmd, out, red)
            elif cmd.image:
                file = file_for(cmd.line, ".head")
                head, image = _image_answer(device, cmd, red, file)
                answer = Answer(cmd.line, cmd.service, file, len(head), image=image)
                atomic_write_bytes(out / answer.file, head, fsync=False)
            else:
                raw = _shell_bytes(device, cmd)
                answer = Answer(cmd.line, cmd.service, file_for(cmd.line), 0)
                if cmd.argv == getprop.GETPROP:
                    props = getprop.parse_props(decode(raw))
                    text = red.text(red.getprop(decode(raw), answer.file), answer.file)
                else:
                    text = red.text(decode(raw), answer.file)
                data = encode(text)
                answers[cmd.line] = data
                answer.bytes = len(data)
                atomic_write_bytes(out / answer.file, data, fsync=False)
        except (InfraError, DeviceError) as e:
            answer = Answer(cmd.line, cmd.service, file_for(cmd.line), 0, error=str(e))
            say(f"  failed: {e}")
        manifest.answers.append(answer)
        manifest.device = device_of(props, answers)
        write_manifest(out, manifest)
    manifest.foreground = foreground_of(answers, manifest.device.get("sdk"))
    write_manifest(out, manifest)
    return manifest


def _not_captured() -> list[ReadCommand]:
    from harness.device.read_only_commands import READ_ONLY

    return [c for c in READ_ONLY if not c.capture]

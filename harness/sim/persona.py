"""How the simulated phone presents itself to adb, to agents and to the harness.

``SIM`` (the default) says what it is: ``ro.crate.sim=1``, ``dumpsys crate_sim`` (its state JSON,
read by the oracle judge) and the reset broadcast that loads a task's preset.

``RETAIL`` (``harness sim serve --as-phone``) looks like a retail Pixel 8 on Android 14 so the
real-phone paths — resets that only force-stop and start apps, device preparation, ADBKeyboard
typing, model-only judging — run end to end against it: no simulator marker in ``getprop``,
``dumpsys``, the package list or the adb banner; ``dumpsys crate_sim`` is refused ("Can't find
service") and the reset broadcast has no receiver. ADBKeyboard is installed but not enabled, as
after ``adb install``. The phone's state stays readable in-process (``SimPhone.state_json``) for
tests that must know what really happened.

Sources of the retail values: the build fingerprint format is the Compatibility Definition's
``BRAND/PRODUCT/DEVICE:RELEASE/ID/INCREMENTAL:TYPE/TAGS``; Pixel 8's product and device name
``shiba``, board platform ``zuma``, SoC ``Tensor G3`` and the build ``AP2A.240805.005`` (August 2024,
incremental 12025142) are as Pixel 8 phones report them in ``getprop`` dumps published with public
device-profile code, and as Google's factory-image list names that build. Package names are those of
the apps these screens stand for on a Pixel: Google's Clock, Contacts and Messages (the packages
SPA-Bench's Pixel tasks start, ``com.google.android.deskclock`` in its single-app-ENG.csv, and
docs/phones.md section 7), Files by Google, Google Keep, Google Wallet, Amazon Shopping. It has no
Calendar, Chrome or Camera: the simulated phone has no such apps, and none is faked (the
``tasks/android`` tasks for them are skipped on it, naming the package).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from harness.sim.phone_api import DeviceInfo


@dataclass(frozen=True)
class Persona:
    name: str
    product: str
    model: str
    device: str
    manufacturer: str
    brand: str
    props: dict[str, str]
    kernel: str                                   # uname -r
    machine: str                                  # uname -m
    sim_services: bool                            # dumpsys crate_sim and the reset broadcast
    packages: dict[str, str] = field(default_factory=dict)   # the sim's own app packages -> shown ones
    system_packages: tuple[str, ...] = ()         # installed, nothing to launch (pm list packages)
    adbkeyboard_enabled: bool = True
    display_id: int = 4619827259835644672         # SurfaceFlinger's id of the built-in screen (the emulator's)

    def info(self, serial: str) -> DeviceInfo:
        return DeviceInfo(serial=serial, product=self.product, model=self.model, device=self.device,
                          manufacturer=self.manufacturer)

    def serial_for(self, seed: str) -> str:
        """A serial number of this persona's shape, stable for ``seed``."""
        if self.sim_services:
            return f"crate-sim-{seed}"
        n = zlib.crc32(seed.encode())
        return f"{n % 100000:05d}FDJH{(n >> 17) % 100000:05d}"  # 14 characters, as Pixel serials


SIM = Persona(
    name="sim", product="crate_sim", model="CrateSim", device="cratesim", manufacturer="crate", brand="crate",
    props={
        "ro.product.cpu.abi": "x86_64",
        "ro.product.cpu.abilist": "x86_64,arm64-v8a",
        "ro.build.id": "CRATE.SIM",
        "ro.kernel.qemu": "0",
        "ro.crate.sim": "1",
    },
    kernel="6.1.0-android14", machine="x86_64", sim_services=True,
)

# What a Pixel 8 on the August 2024 build of Android 14 reports (sources in the module docstring).
RETAIL = Persona(
    name="retail", product="shiba", model="Pixel 8", device="shiba", manufacturer="Google", brand="google",
    props={
        "ro.product.cpu.abi": "arm64-v8a",
        "ro.product.cpu.abilist": "arm64-v8a",
        "ro.product.marketname": "Pixel 8",
        "ro.build.id": "AP2A.240805.005",
        "ro.build.display.id": "AP2A.240805.005",
        "ro.build.version.incremental": "12025142",
        "ro.build.version.security_patch": "2024-08-05",
        "ro.build.fingerprint": "google/shiba/shiba:14/AP2A.240805.005/12025142:user/release-keys",
        "ro.hardware": "shiba",
        "ro.boot.hardware": "shiba",
        "ro.boot.hardware.platform": "zuma",
        "ro.board.platform": "zuma",
        "ro.soc.manufacturer": "Google",
        "ro.soc.model": "Tensor G3",
        "ro.boot.verifiedbootstate": "green",
        "ro.boot.flash.locked": "1",
        "ro.boot.vbmeta.device_state": "locked",
        "ro.product.locale": "en-US",
        "ro.build.characteristics": "nosdcard",
    },
    kernel="5.15.137-android14-11-g6d8d9f2e2a3c-ab12025142", machine="aarch64", sim_services=False,
    packages={
        "com.android.deskclock": "com.google.android.deskclock",
        "com.android.contacts": "com.google.android.contacts",
        "com.android.messaging": "com.google.android.apps.messaging",
        "com.crate.files": "com.google.android.apps.nbu.files",
        "com.crate.notes": "com.google.android.keep",
        "com.crate.wallet": "com.google.android.apps.walletnfcrel",
        "com.crate.shop": "com.amazon.mShop.android.shopping",
    },
    system_packages=(
        "com.android.bluetooth", "com.android.phone", "com.android.providers.media", "com.android.providers.settings",
        "com.android.server.telecom", "com.android.shell", "com.google.android.gms", "com.google.android.gsf",
        "com.google.android.webview",
    ),
    adbkeyboard_enabled=False,
    display_id=4619827677550801152,
)

"""``harness sim``: serve a simulated phone as an ADB device (``sim serve``), or let a person use one
(``sim human``, :mod:`harness.cli.record`)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from harness.cli.options import busy_port, size_arg
from harness.cli.record import add_sim_human_parser
from harness.core.user_error import UserError


def cmd_sim_serve(args: argparse.Namespace) -> int:
    from harness.core.profile_folder import ProfileError
    from harness.sim.phone import SimPhone
    from harness.sim.serve import serve

    profile = None
    if args.profile:
        from harness.sim.profile import load

        try:
            profile = load(args.profile)
        except ProfileError as e:
            raise UserError(f"--profile {e}") from None
        if args.size and profile.size() and tuple(args.size) != profile.size():
            raise UserError(f"--size {args.size[0]}x{args.size[1]}: the profile {profile.name} has a "
                            f"{profile.size()[0]}x{profile.size()[1]} screen (its `wm size`); leave --size out")
        if args.no_touchscreen and profile.input_devices() is not None:
            raise UserError(f"--no-touchscreen: the profile {profile.name} lists its input devices (its getevent)")
    w, h = args.size or (profile.size() if profile is not None and profile.size() else None) or (1080, 2400)
    try:
        phone = SimPhone(w, h, locale=args.lang, seed=args.seed, adbkeyboard=not args.no_adbkeyboard,
                         as_phone=args.as_phone, lock=args.lock, profile=profile)
    except (ValueError, ProfileError) as e:
        raise UserError(str(e)) from None
    phone.info.serial = phone.persona.serial_for(str(args.port))
    phone.info.touchscreen = not args.no_touchscreen
    phone.screencap_png_level = args.screencap_png_level
    phone.reset(locale=args.lang, seed=args.seed)
    if args.host not in ("127.0.0.1", "localhost", "::1"):  # said before the port opens
        print("warning: this ADB port accepts anyone who can reach it (ADB has no authentication here)",
              file=sys.stderr, flush=True)
    try:
        handle = serve(phone, args.port, host=args.host, mode=args.mode, command_log=args.command_log)
    except OSError as e:
        if e.filename is not None:  # the command log's file, not the port
            raise UserError(f"--command-log {args.command_log}: cannot write it ({e.strerror or e})") from None
        raise busy_port(args.host, args.port, e) from None
    looks = f"as a retail {phone.info.model}" if args.as_phone else "as the simulated phone"
    if profile is not None:
        looks += f", in the formats of the profile {profile.name} ({phone.info.model}, Android {phone.info.release})"
    print(f"simulated phone {w}x{h} ({args.lang}, {looks}, lock: {args.lock}) listening on {args.host}:{handle.port}; "
          f"connect with: harness adb connect {args.host}:{handle.port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    finally:
        handle.stop()
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    sim = sub.add_parser("sim", help="the simulated phone").add_subparsers(dest="sim_cmd", required=True)
    ss = sim.add_parser("serve", help="serve a simulated phone as an ADB device (harness adb connect HOST:PORT)")
    ss.add_argument("--port", type=int, default=6520, help="TCP port (avoid odd ports 5555-5585: adb auto-adds those; "
                                                           "0: any free one, said in the banner)")
    ss.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback only)")
    ss.add_argument("--lang", choices=["en", "zh"], default="en", help="UI language")
    ss.add_argument("--seed", type=int, default=0)
    ss.add_argument("--size", type=size_arg, default=None,
                    help="screen size WIDTHxHEIGHT (default 1080x2400, or the profile's)")
    ss.add_argument("--mode", choices=["normal", "unauthorized", "shell_v1_only"], default="normal",
                    help="test modes: an unauthorized device, or one without shell protocol v2")
    ss.add_argument("--no-adbkeyboard", action="store_true", help="do not offer the ADBKeyboard input method")
    ss.add_argument("--as-phone", action="store_true",
                    help="look like a retail phone (Pixel 8 props, no simulator markers, no `dumpsys crate_sim`, "
                         "no reset broadcast; ADBKeyboard installed but not enabled)")
    ss.add_argument("--lock", choices=["none", "swipe", "pin"], default="none",
                    help="lock screen: none, swipe, or pin (a secure lock; PIN 1234)")
    shipped = sorted(p.name for p in (Path(__file__).parent.parent / "sim" / "profiles").glob("*") if p.is_dir())
    ss.add_argument("--profile", metavar="DIR|NAME",
                    help="answer in a real phone's formats: a folder `harness devices capture` wrote, or a shipped "
                         f"profile ({', '.join(shipped)}: harness/sim/profiles); its screen size, input devices "
                         "and input methods too")
    ss.add_argument("--command-log", metavar="FILE",
                    help="append every shell command line received to FILE as one JSON line")
    ss.add_argument("--no-touchscreen", action="store_true", help="no touchscreen among its input devices (getevent)")
    ss.add_argument("--screencap-png-level", type=int, choices=range(10), default=1, metavar="0-9",
                    help="zlib level of `screencap -p` (default 1, fast; 6 costs it as a phone's screencap, "
                         "which uses Skia's default level)")
    ss.set_defaults(run=cmd_sim_serve)

    add_sim_human_parser(sim)

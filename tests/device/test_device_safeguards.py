"""Which adb server (as the adb client picks it), which kind of device (a phone, an emulator, the
simulated phone) and the refusal of `pm clear` on phones."""

from __future__ import annotations

import pytest

from harness.device.adb_server import AdbEndpoint, AdbEndpointError, adb_argv, adb_endpoint
from harness.device.safeguards import ClearRefused, kind_of, refuse_clear
from harness.core.tasks import parse_task


def test_adb_endpoint_follows_adb():
    assert adb_endpoint(env={}) == AdbEndpoint("127.0.0.1", 5037)
    env = {"ANDROID_ADB_SERVER_ADDRESS": "10.0.0.7", "ANDROID_ADB_SERVER_PORT": "5099"}
    assert adb_endpoint(env=env) == AdbEndpoint("10.0.0.7", 5099)
    assert adb_endpoint(port=6000, env=env) == AdbEndpoint("10.0.0.7", 6000)   # each flag replaces its variable
    assert adb_endpoint(host="phones.lab", env=env) == AdbEndpoint("phones.lab", 5099)
    sock = {**env, "ADB_SERVER_SOCKET": "tcp:192.168.1.5:5038"}
    assert adb_endpoint(env=sock) == AdbEndpoint("192.168.1.5", 5038)          # preferred when no flag is given
    assert adb_endpoint(port=7000, env=sock) == AdbEndpoint("10.0.0.7", 7000)  # ignored once one is
    assert adb_endpoint(env={"ADB_SERVER_SOCKET": "tcp:5040"}) == AdbEndpoint("127.0.0.1", 5040)
    with pytest.raises(AdbEndpointError, match="ANDROID_ADB_SERVER_PORT"):
        adb_endpoint(env={"ANDROID_ADB_SERVER_PORT": "lots"})


def test_adb_subprocesses_get_exactly_the_chosen_server(monkeypatch):
    monkeypatch.setenv("ANDROID_ADB_SERVER_ADDRESS", "10.9.9.9")
    monkeypatch.setenv("ADB_SERVER_SOCKET", "tcp:10.9.9.9:1")
    argv, env = adb_argv(["devices"], 5123, "phones.lab")
    assert argv[1:] == ["-H", "phones.lab", "-P", "5123", "devices"]
    assert "ADB_SERVER_SOCKET" not in env and "ANDROID_ADB_SERVER_ADDRESS" not in env
    argv, env = adb_argv(["start-server"], 5123, "127.0.0.1")
    assert argv[1:] == ["-P", "5123", "start-server"]  # a local server may be started: no -H
    assert env["ANDROID_ADB_SERVER_PORT"] == "5123"


@pytest.mark.parametrize("serial,props,sim,kind", [
    ("127.0.0.1:6520", {}, True, "simulated"),
    ("emulator-5554", {}, False, "emulator"),
    ("192.168.1.20:5555", {"ro.kernel.qemu": "1"}, False, "emulator"),
    ("localhost:6520", {"ro.boot.qemu": "1", "ro.hardware": "ranchu"}, False, "emulator"),
    ("0a1b2c3d", {"ro.hardware": "cutf_cvm"}, False, "emulator"),
    ("192.168.56.101:5555", {"ro.hardware": "vbox86"}, False, "emulator"),
    ("38091FDJG00EMF", {"ro.hardware": "shiba", "ro.kernel.qemu": "0"}, False, "phone"),
    ("adb-R5CW-._adb-tls-connect._tcp", {}, False, "phone"),
])
def test_device_kinds(serial, props, sim, kind):
    assert kind_of(serial, props, sim) == kind


def test_clear_is_refused_on_phones_naming_tasks_packages_and_devices():
    clearing = parse_task({"id": "gmail_0", "instruction": "x", "reference_steps": 1,
                           "setup": {"clear": ["com.google.android.gm"]}})
    stopping = parse_task({"id": "gmail_1", "instruction": "x", "reference_steps": 1,
                           "setup": {"stop": ["com.google.android.gm"]}})
    kinds = {"R5CW1": "phone", "emulator-5554": "emulator"}
    with pytest.raises(ClearRefused) as e:
        refuse_clear([clearing, stopping], kinds, allow=False)
    msg = str(e.value)
    assert "'gmail_0'" in msg and "com.google.android.gm" in msg and "R5CW1" in msg and "--allow-clear" in msg
    assert "gmail_1" not in msg and "emulator-5554" not in msg
    refuse_clear([clearing], kinds, allow=True)
    refuse_clear([clearing], {"emulator-5554": "emulator", "s": "simulated"}, allow=False)
    refuse_clear([stopping], kinds, allow=False)


def test_the_device_itself_refuses_clear_on_a_phone(serve_sim, tmp_path):
    """Even a caller that skips the run's check cannot clear a phone's app data by accident."""
    from harness.device.base import DeviceError
    from harness.sim.command_log import read_command_log, ran
    from harness.core.tasks import Setup

    log = tmp_path / "log.jsonl"
    sim = serve_sim(as_phone=True, command_log=log)
    dev = sim.device()
    with pytest.raises(DeviceError, match="refusing setup.clear"):
        dev.reset(Setup(clear=["com.google.android.contacts"]), "en")
    assert not ran(read_command_log(log), "pm", "clear") and dev.last_reset["complete"] is False
    allowed = sim.device(allow_clear=True)
    allowed.reset(Setup(clear=["com.google.android.contacts"], stop=["com.android.settings"]), "en")
    assert allowed.last_reset["cleared"] == ["com.google.android.contacts"] and allowed.last_reset["stopped"] == ["com.android.settings"]
    assert ran(read_command_log(log), "pm", "clear") == [["pm", "clear", "com.google.android.contacts"]]

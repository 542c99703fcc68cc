"""The cluster's nodes and what each can reach: its own adb server's phones (with their health) and
the model endpoints, asked by a task pinned to that node, so every answer is the node's own."""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from harness.farm.errors import FarmError

NAMESPACE = "crate-harness"   # device actors are named in it: one actor per phone across runs
PROBE_TIMEOUT_S = 120.0       # a node's first task starts a Python worker there: seconds on a busy host
ENDPOINT_TIMEOUT_S = 10.0


HOW_TO_START = ("start one with `ray start --head --port PORT` on the head host and `ray start --address HEAD:PORT` "
                "on every host with phones, and run harness on a host of the cluster (docs/farm.md)")
REACH_TIMEOUT_S = 5.0     # something must accept a TCP connection and answer as gRPC at the address by then
CONNECT_TIMEOUT_S = 120.0  # a real GCS answered: joining a busy cluster may take a while, but not forever
# A Ray head's GCS port (and a Ray Client server's) is a gRPC server, so it answers the HTTP/2 client
# preface with a SETTINGS frame (RFC 9113 sections 3.4 and 6.5: frame type 0x4). Measured here against
# `ray start --head` of the farm extra: the frame comes back in under a millisecond.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # + empty SETTINGS
_SETTINGS = 4


def gcs_address(address: str) -> tuple[str, int] | None:
    """(host, port) of ``HOST:PORT`` (or ``ray://HOST:PORT``); None for ``auto`` or what is not one."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def check_reachable(address: str, timeout: float = REACH_TIMEOUT_S) -> None:
    """A :class:`FarmError` in one line when nothing accepts a connection at ``address`` within
    ``timeout``, or what accepts it does not answer as a gRPC server (a GCS port) does: Ray's own
    join would wait minutes, printing its C++ warnings about another address."""
    target = gcs_address(address)
    if target is None:
        return
    try:
        conn = socket.create_connection(target, timeout=timeout)
    except OSError as e:
        why = "no answer within {:g} s".format(timeout) if isinstance(e, TimeoutError) else (e.strerror or str(e))
        raise FarmError(f"no Ray cluster at {address}: {why}; {HOW_TO_START}") from None
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):  # its GCS speaks TLS first: not probed
        conn.close()
        return
    try:
        conn.settimeout(timeout)
        conn.sendall(_HTTP2_PREFACE)
        head = b""
        while len(head) < 9:  # one frame header: length (3), type (1), flags (1), stream (4)
            got = conn.recv(9 - len(head))
            if not got:
                break
            head += got
    except OSError as e:
        head, why = b"", ("no answer within {:g} s".format(timeout) if isinstance(e, TimeoutError)
                          else (e.strerror or str(e)))
    else:
        why = "it closed the connection" if len(head) < 9 else "it answered, but not as gRPC does"
    finally:
        conn.close()
    if len(head) < 9 or head[3] != _SETTINGS:
        raise FarmError(f"something listens at {address}, but not a Ray head's GCS port ({why}); {HOW_TO_START}")


def connect(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Join the cluster at ``address`` (``HOST:PORT`` of the head's GCS, or ``auto`` inside a Ray
    job) as a driver, or a :class:`FarmError` in one line within about ``REACH_TIMEOUT_S +
    timeout`` seconds. The driver must run on a host of the cluster (the head, typically)."""
    if ray.is_initialized():
        return
    check_reachable(address)
    failed: list[BaseException] = []

    def join() -> None:
        try:
            ray.init(address=address, namespace=NAMESPACE, logging_level=logging.WARNING, log_to_driver=False,
                     configure_logging=True)
        except BaseException as e:  # said by the caller's thread
            failed.append(e)

    joining = threading.Thread(target=join, name="ray-join", daemon=True)
    joining.start()
    joining.join(timeout)
    if joining.is_alive():  # a gRPC server answered there, but Ray's join does not end: not waited for
        raise FarmError(f"the Ray cluster at {address} did not let this driver join within {timeout:g} s (a gRPC "
                        f"server answers there; is it a Ray head's GCS port, and is the head alive?); {HOW_TO_START}")
    if failed:
        e = failed[0]
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise FarmError(f"cannot join the Ray cluster at {address}: {first}; {HOW_TO_START}") from None


def pinned(node_id: str) -> NodeAffinitySchedulingStrategy:
    """Schedule on this node only (never elsewhere: the phones are there)."""
    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)


@dataclass
class Node:
    node_id: str
    label: str                       # the node's name (ray start --node-name, default its address)
    address: str
    host: str = ""                   # the node's hostname, as it says
    adb_port: int | None = None      # its adb server's port
    devices: list[dict[str, Any]] = field(default_factory=list)   # DeviceDescription.to_json() + node
    problem: str | None = None       # why the node's phones are left out (adb server, model endpoint)

    def to_json(self) -> dict[str, Any]:
        return {"node": self.label, "node_id": self.node_id, "address": self.address, "host": self.host,
                "adb_port": self.adb_port, "devices": [d["serial"] for d in self.devices], "problem": self.problem}


def alive_nodes() -> list[dict[str, Any]]:
    return [n for n in ray.nodes() if n.get("Alive")]


def label_for(info: dict[str, Any], taken: set[str]) -> str:
    """The node's name; when another node already has it (two raylets on one host), with its id."""
    name = str(info.get("NodeName") or info.get("NodeManagerAddress") or info["NodeID"][:8])
    return name if name not in taken else f"{name}#{info['NodeID'][:6]}"


def describe_attached(device_config: Any) -> dict[str, Any]:
    """This host's adb server and its devices, each described (health included) as ``harness
    devices`` describes them, with the changes a crashed run left to restore on it; ``problem``
    when the adb server cannot be asked. Run on the node, so its own environment picks the server."""
    import adbutils

    from harness.device.adb_server import AdbEndpointError
    from harness.device.base import DeviceError
    from harness.device.prepare import Journal, waiting_values

    out: dict[str, Any] = {"host": socket.gethostname(), "adb_port": None, "devices": [], "problem": None}
    try:
        ep = device_config.endpoint()
    except AdbEndpointError as e:
        out["problem"] = f"has no usable adb server address: {e}"
        return out
    out["adb_port"] = ep.port
    try:
        listed = adbutils.AdbClient(host=ep.host, port=ep.port).list()
    except (adbutils.AdbError, OSError) as e:
        out["problem"] = f"cannot reach its adb server at {ep}: {e}"
        return out
    try:
        pending = {j.serial: j for j in Journal.pending()}  # this node's journals (its own state folder)
    except DeviceError:
        pending = {}
    for d in listed:
        dev = device_config.open(d.serial) if d.state == "device" else None
        row = (dev.describe().to_json() if dev is not None
               else {"serial": d.serial, "state": d.state, "healthy": False, "problem": d.state})
        j = pending.get(d.serial)
        out["devices"].append({**row, "pending_restore": len(j.changes) if j else 0,
                               "to_restore": waiting_values(j, dev if row.get("healthy") else None) if j else []})
    return out


def endpoint_problem(base_url: str, timeout: float = ENDPOINT_TIMEOUT_S) -> str | None:
    """None when an OpenAI-compatible endpoint answers from here (any HTTP answer counts: a 401 or
    404 still proves the route), else why not. Asked with the openai client the agents use, so
    this host's proxy settings and name resolution apply; no API key is sent."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="reachability-probe", timeout=timeout, max_retries=0)
    try:
        client.models.list()
    except openai.APIStatusError:
        return None
    except openai.APIConnectionError as e:  # also the timeout
        cause = e.__cause__ or e.__context__
        return f"{type(e).__name__}: {e}" + (f" ({type(cause).__name__}: {cause})" if cause else "")
    finally:
        client.close()
    return None


@ray.remote(num_cpus=0, max_retries=0)
def probe_node(device_config: Any, endpoints: dict[str, str]) -> dict[str, Any]:
    """Run on one node: its phones, and the model endpoints (role -> base URL) it cannot reach."""
    out = describe_attached(device_config)
    out["unreachable"] = {role: why for role, url in endpoints.items() if (why := endpoint_problem(url))}
    out["pid"] = os.getpid()
    return out


def probe(infos: list[dict[str, Any]], device_config: Any, endpoints: dict[str, str], taken: set[str],
          timeout: float = PROBE_TIMEOUT_S) -> list[Node]:
    """Probe these nodes at once (each on itself) and read them into :class:`Node`\\ s; a node that
    does not answer in ``timeout`` or fails says so in its ``problem``."""
    nodes, refs = [], []
    for info in infos:
        label = label_for(info, taken)
        taken.add(label)
        nodes.append(Node(info["NodeID"], label, str(info.get("NodeManagerAddress") or "")))
        refs.append(probe_node.options(scheduling_strategy=pinned(info["NodeID"])).remote(device_config, endpoints))
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout) if refs else ([], [])
    for node, ref in zip(nodes, refs):
        if ref not in ready:
            node.problem = f"did not answer within {timeout:g}s"
            ray.cancel(ref, force=True)
            continue
        try:
            got = ray.get(ref)
        except ray.exceptions.RayError as e:
            node.problem = f"could not be asked for its phones: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
            continue
        node.host, node.adb_port = got["host"], got["adb_port"]
        node.devices = [{**d, "node": node.label, "node_id": node.node_id} for d in got["devices"]]
        problems = [got["problem"]] if got["problem"] else []
        problems += [f"cannot reach the {role} model endpoint {endpoints[role]} ({why})"
                     for role, why in sorted(got["unreachable"].items())]
        node.problem = "; ".join(problems) or None
    return nodes


def list_cluster_devices(device_config: Any) -> list[dict[str, Any]]:
    """``harness devices --cluster``: each node's devices (``node`` set), and a row for each node
    that has a problem (its adb server cannot be asked, it did not answer)."""
    rows: list[dict[str, Any]] = []
    for node in probe(alive_nodes(), device_config, {}, set()):
        rows.extend(node.devices)
        if node.problem or not node.devices:
            rows.append({"serial": "-", "node": node.label, "node_id": node.node_id, "state": "-",
                         "healthy": False, "problem": node.problem or "no device attached"})
    return rows

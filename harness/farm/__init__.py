"""A device farm on Ray: one run across the phones of many hosts.

Hosts join a Ray cluster with Ray's own CLI (``ray start --head`` on one, ``ray start --address
HEAD:6379`` on every host with phones, each beside its own adb server). ``harness run --cluster
ADDRESS`` then asks every node's adb server for its phones (a task pinned to that node), starts one
actor per healthy phone on the phone's own node (screenshots never cross the network; the agent,
the live judges and the monitors run in the actor beside the phone and call the shared model
endpoints), and feeds them episodes from the driver's queue (:func:`harness.run.suite.run_stations`,
the local pool's queue, retries and records). Each finished episode is shipped back whole and
installed into the run folder atomically (:meth:`harness.records.RunWriter.install_episode`), so a
farm run and a local run leave the same run folder.

This package is the only part of the harness that imports Ray, an optional extra
(``pip install -e '.[farm]'`` in the checkout: crate-harness is not on PyPI): ``import harness.farm`` works without it, and every entry
point says how to install it.
"""

from __future__ import annotations

from typing import Any

from harness.farm.errors import FarmError

__all__ = ["FarmError", "INSTALL_HINT", "cluster_devices", "load_ray", "open_farm"]

INSTALL_HINT = ("pip install -e '.[farm]' in the crate-harness checkout (it is not published on PyPI; or: pip install "
                "'ray[default]>=2.9' into this environment)")


def load_ray() -> Any:
    """The ``ray`` module, or a :class:`FarmError` saying how to install it."""
    try:
        import ray
    except ImportError as e:
        raise FarmError(f"--cluster needs Ray, an optional part of crate-harness that is not installed "
                        f"({e}); install it with: {INSTALL_HINT}") from None
    return ray


def open_farm(address: str, device_config: Any, plugins: Any, *, models: dict[str, Any] | None = None,
              **kw: Any) -> Any:
    """Connect to the cluster at ``address`` and start a device actor per usable phone of every
    node: a :class:`harness.farm.driver.Farm`. ``models`` (role -> ``ModelConfig`` or None) name
    the endpoints every node must reach and the API keys handed to the actors; the other keywords
    go to the Farm."""
    load_ray()
    from harness.farm.driver import Farm, api_key_values

    models = {role: m for role, m in (models or {}).items() if m is not None}
    return Farm(address, device_config, plugins, endpoints={role: m.base_url for role, m in models.items()},
                secrets=api_key_values(models), **kw)


def cluster_devices(address: str, device_config: Any) -> list[dict[str, Any]]:
    """Every node's devices with their health, for ``harness devices --cluster``: one row per device
    (its ``node``), and one per node whose adb server cannot be asked."""
    load_ray()
    from harness.farm.nodes import connect, list_cluster_devices

    connect(address)
    return list_cluster_devices(device_config)

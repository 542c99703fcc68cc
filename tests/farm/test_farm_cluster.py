"""The farm on a real multi-node Ray cluster (tests/farm/scenario_cluster.py), run inside a network
namespace of its own whose only interface is loopback: outside one, Ray binds to the machine's
outward address even when told 127.0.0.1, and farm tests must never use it. When the namespace
cannot be made the test is skipped with the reason; it never falls back.

Run alone with ``scripts/test -m farm``."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest

from tests.faults.helpers import ROOT
from tests.farm.lab import in_own_netns, netns_problem

pytestmark = [pytest.mark.slow, pytest.mark.farm]


def failure_digest(out: str) -> str:
    """What a failed inner run says, short enough to survive a CI log's cuts: the end of its output,
    then (last, where a cut log still shows it) where the failed scenario was, its traceback up to
    what it captured, and the FAILED lines. A timeout's dump of every thread (the model servers' idle
    ones, Ray's state dumps) used to push the scenario's own line out of the log."""
    where = re.search(r"=+ FAILURES =+\n(.*?)(?=\n-+ Captured |\n\++ Timeout \++|\Z)", out, re.S)
    failed = [line for line in out.splitlines() if line.lstrip().startswith(("FAILED ", "ERROR "))]
    return "\n".join([out[-8000:], "--- where the scenario failed ---", where.group(1)[-6000:] if where else "(no FAILURES section)",
                      *failed])


def skip_without_ray() -> None:
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed (pip install -e '.[farm]'; scripts/test installs it)")


def skip_without_a_cluster_here() -> None:
    """Skipped, with the reason, where Ray is missing or no network namespace of our own can be made."""
    skip_without_ray()
    problem = netns_problem()
    if problem:
        pytest.skip(f"no network namespace of our own can be made here: {problem}")


@pytest.mark.timeout(2700)  # one cluster for every scenario: nodes start in 10-20 s each on a busy machine
def test_farm_scenarios_on_a_multi_node_ray_cluster_in_its_own_network_namespace(tmp_path):
    skip_without_a_cluster_here()
    p = in_own_netns([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-x", "-v", "-rA", "--durations=0",
                      "-o", "python_files=scenario_*.py", f"--basetemp={tmp_path / 'inner'}",
                      str(ROOT / "tests" / "farm" / "scenario_cluster.py")], timeout=2400)
    out = p.stdout + p.stderr
    assert p.returncode == 0, failure_digest(out)
    print(out[out.find("slowest durations"):][:4000])  # where the scenarios' time goes (shown with -rA)
    summary = out.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 7 and "skipped" not in summary and "failed" not in summary, out[-5000:]


HEAD_ON_A_RAY_PORT = """
import sys
from pathlib import Path
from ray._private import ray_constants
from tests.farm.lab import FarmLab
with FarmLab(Path(sys.argv[1])) as lab:
    lab.port = ray_constants.DEFAULT_DASHBOARD_AGENT_LISTEN_PORT  # a port Ray keeps for the node's dashboard agent
    lab.address = f"127.0.0.1:{lab.port}"
    lab.start_head()
    try:
        lab.wait_nodes(["head"], timeout=600)
    except RuntimeError as e:
        print(f"said: {e}")
    else:
        print("joined")
"""


@pytest.mark.timeout(300)
def test_a_head_that_cannot_start_is_said_with_its_log_not_waited_for(tmp_path):
    """The lab's head given a port Ray keeps for itself exits at once (what a fresh-clone run drew,
    52365); the lab says so with the head's log instead of waiting in ray.init for a GCS that never
    comes (that run waited 13 minutes, then the module's timeout). Its wait is 600 s and this test's
    bound 240: only the exit seen can pass it."""
    skip_without_a_cluster_here()
    p = in_own_netns([sys.executable, "-c", HEAD_ON_A_RAY_PORT, str(tmp_path)], timeout=240,
                     env={"PYTHONPATH": str(ROOT)})
    said = [line for line in p.stdout.splitlines() if line.startswith("said: ")]
    assert p.returncode == 0 and said, (p.stdout + p.stderr)[-4000:]
    assert "ray node head exited with" in said[0] and "is used by other components" in said[0], said[0]


def test_the_labs_gcs_port_is_never_one_ray_keeps_for_a_nodes_own_parts(monkeypatch):
    skip_without_ray()
    from tests.farm import lab

    drawn = iter([52365, 8265, 10001, 10002, 19999, 40123])
    monkeypatch.setattr(lab, "free_port", lambda: next(drawn))
    assert lab.gcs_port() == 40123

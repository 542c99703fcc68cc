"""The driver's side of a farm run: the nodes and their device actors, a station per actor for the
run's queue (:func:`harness.run.suite.run_stations`), and a watch for nodes that join while it runs.

Faults, as the driver sees them:
- a node (or its actor) lost mid-episode: the episode's stream breaks; the episode ends
  ``infra_error`` naming the node and is retried once on another station; the lost station is
  dropped (its actor cannot come back);
- a phone lost while its node lives: the runner on the node records ``infra_error`` as a local run
  does; the actor waits ``--reconnect-timeout`` for the phone before its station is dropped;
- a node lost while idle: found when its station takes the next job, which goes back to the queue
  unattempted;
- the driver killed: Ray ends its actors (they belong to the driver); nothing half-installed is
  visible, and ``--resume`` redoes exactly the tasks without a result line.

Each actor prepares its phone and keeps its journal on its node (harness/farm/actor.py); at the end
:meth:`Farm.restore` asks every actor to put its phone back, and for an actor that died, a task
pinned to its node does it from the journal there (a node that is gone keeps its journals for
``harness devices restore`` on it, or the phone's next run).
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable

import ray

from harness.farm.errors import FarmError
from harness.farm.actor import DeviceActor, Secrets, restore_on_node
from harness.farm.nodes import NAMESPACE, Node, alive_nodes, connect, pinned, probe
from harness.records import RunWriter, now_iso
from harness.run.runner import EpisodeOutcome, Interrupted
from harness.run.suite import Attempt, Job, Plugins, StationLost, SuiteConfig
from harness.core.usage import Meter

POLL_S = 0.2              # how often a station looks at its stream and at the stop flag
WATCH_S = 2.0             # how often the cluster is asked for nodes that joined
NAME_WAIT_S = 60.0        # how long a phone's actor name, held by an ending run's actor, is waited for
START_TIMEOUT_S = 180.0   # an actor's process starting on a busy node
RESTORE_TIMEOUT_S = 180.0  # every phone put back at the end of the run (an episode still stopping first)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:240] if text else ''}"


class FarmStation:
    """A phone on a farm node, driven through its actor."""

    def __init__(self, actor: Any, node: Node, description: dict[str, Any]):
        self.actor, self.node, self.description = actor, node, description
        self.serial = description["serial"]
        self.name = f"{node.label}/{self.serial}"
        self.frames: dict[str, Any] = {"error": "not measured: the actor has not started"}
        self.session: dict[str, Any] = {}  # what prepare did on the node (DeviceSession's entry)

    def frame_choice(self) -> dict[str, Any]:
        """The frame sources' choice and timings, measured on the node when the actor started."""
        return self.frames

    def run(self, job: Job, writer: RunWriter, cfg: SuiteConfig, should_stop: Callable[[], bool],
            emit: Callable[[str, dict[str, Any]], None], meter: Meter) -> Attempt:
        cap = cfg.max_steps or job.task.cap
        fields = {"device": self.serial, "node": self.node.label}
        started_at, t0 = now_iso(), time.monotonic()
        stream = self.actor.run.options(num_returns="streaming").remote(job.task, cap, job.seed, job.episode)
        begun, halted, proposed, executed = False, False, 0, 0
        try:
            while True:
                if should_stop() and not halted:
                    self.actor.halt.remote()  # the actor stops at its next step and says so
                    halted = True
                ready, _ = ray.wait([stream], timeout=POLL_S)
                if not ready:
                    continue
                try:
                    item = ray.get(next(stream))
                except StopIteration:
                    raise FarmError("the episode's stream ended without its records") from None
                kind = item["kind"]
                if kind == "started":
                    begun = True
                elif kind == "step":
                    proposed = item["step"]
                    executed += bool(item.get("executed"))
                    emit("step", {**item, "device": self.name})
                elif kind == "interrupted":
                    raise Interrupted()
                elif kind == "done":
                    break
        except (ray.exceptions.RayError, FarmError) as e:
            if not begun:
                raise StationLost(f"node {self.node.label} is gone ({_first_line(e)})") from None
            lost = isinstance(e, ray.exceptions.RayActorError)
            what = f"node {self.node.label} lost during step {proposed + 1}" if lost else \
                f"the episode failed on node {self.node.label}"
            out = EpisodeOutcome(status="infra_error", steps=executed, cap=cap, proposed_steps=proposed,
                                 error=f"{what}: {_first_line(e)}", started_at=started_at, ended_at=now_iso(),
                                 duration_s=round(time.monotonic() - t0, 4))
            return Attempt(out, lambda res: writer.install_episode(res, {}, retry=job.attempt > 1), fields)
        out: EpisodeOutcome = item["outcome"]
        files: dict[str, bytes] = item["files"]
        meter.add(out.usage)
        return Attempt(out, lambda res: writer.install_episode(res, files, retry=job.attempt > 1), fields,
                       item.get("reset"), item.get("conditions"))

    def reconnect(self, timeout: float) -> bool:
        try:
            return bool(ray.get(self.actor.reconnect.remote(timeout), timeout=timeout + 60))
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError):
            return False


class Farm:
    """The cluster at ``address``, its nodes, and a :class:`FarmStation` per usable phone.

    ``endpoints`` (role -> base URL) are the model endpoints every node must reach: a node that
    cannot is reported by name and its phones are left out. ``select`` (serials, or
    ``node/serial``) keeps only those phones. ``secrets`` go to every actor's key lookup (the
    model API keys the driver has). ``say`` prints what the user must know (nodes left out,
    nodes that joined); ``on_change`` is called when a node's phones join the run."""

    def __init__(self, address: str, device_config: Any, plugins: Plugins, *, endpoints: dict[str, str] | None = None,
                 select: list[str] | None = None, secrets: dict[str, str] | None = None,
                 say: Callable[[str], None] = lambda text: None, watch: bool = True, prepare: Any = None,
                 holder: str = "", check: Callable[[list[dict[str, Any]]], None] | None = None):
        self.address, self.device_config, self.endpoints = address, device_config, dict(endpoints or {})
        self.prepare, self.holder = prepare, holder  # each actor prepares its phone so; who holds the phones
        self.restored: dict[str, dict[str, Any]] | None = None
        self.plugins = Plugins(agent=plugins.agent, observers=plugins.observers, monitors=plugins.monitors,
                               live=plugins.live)
        self.select = list(select or [])
        self.secrets = Secrets(secrets or {})
        self.say = say
        self.on_change: Callable[[], None] = lambda: None
        # the run's checks of the phones found (their kind, unsafe tasks without a gate), before any
        # actor prepares one: raising refuses the run at start, and leaves a node that joins later out
        self.check = check
        self.nodes: dict[str, Node] = {}
        self.stations: list[FarmStation] = []
        self._labels: set[str] = set()
        self._joined: "queue.Queue[FarmStation]" = queue.Queue()
        self._closing = threading.Event()
        self._lock = threading.Lock()
        connect(address)
        try:
            self.stations = self._add_nodes(alive_nodes(), first=True)
        except BaseException:
            self.close()
            raise
        missing = [s for s in self.select if not any(s in (st.serial, st.name) for st in self.stations)]
        if missing:
            self.close()
            raise FarmError(f"--device {', '.join(missing)}: not a usable device on any node of the cluster "
                            "(see `harness devices --cluster`)")
        if not self.stations:
            self.close()
            raise FarmError(f"no usable device on any node of the cluster at {address} "
                            "(see `harness devices --cluster`)")
        self._watcher = threading.Thread(target=self._watch, name="farm-watch", daemon=True) if watch else None
        if self._watcher is not None:
            self._watcher.start()

    # -- what the run records ------------------------------------------------------------------
    @property
    def descriptions(self) -> list[dict[str, Any]]:
        with self._lock:
            return [st.description for st in self.stations]

    def manifest(self) -> dict[str, Any]:
        with self._lock:
            nodes = [n.to_json() for n in self.nodes.values()]
        return {"address": self.address, "ray": ray.__version__, "nodes": nodes}

    def frame_choices(self) -> dict[str, Callable[[], dict[str, Any]]]:
        """Each station's frame choice (measured on its node when its actor started), by name."""
        with self._lock:
            return {st.name: st.frame_choice for st in self.stations}

    def joining(self) -> list[FarmStation]:
        """Stations of nodes that joined since the last call (for ``run_stations``)."""
        out = []
        while True:
            try:
                out.append(self._joined.get_nowait())
            except queue.Empty:
                return out

    # -- nodes and actors --------------------------------------------------------------------
    def _wanted(self, d: dict[str, Any]) -> bool:
        return not self.select or d["serial"] in self.select or f"{d['node']}/{d['serial']}" in self.select

    def _add_nodes(self, infos: list[dict[str, Any]], first: bool = False) -> list[FarmStation]:
        with self._lock:
            nodes = probe(infos, self.device_config, self.endpoints, self._labels)
            for n in nodes:
                self.nodes[n.node_id] = n
        wanted: list[tuple[Node, dict[str, Any]]] = []
        for n in nodes:
            usable = [d for d in n.devices if self._wanted(d)]
            if n.problem:
                left = f"; its {len(usable)} device(s) are left out of this run" if usable else ""
                self.say(f"node {n.label}: {n.problem}{left}")
                continue
            for d in usable:
                if d.get("healthy"):
                    wanted.append((n, d))
                else:
                    self.say(f"{n.label}/{d['serial']}: left out, not usable: {d.get('problem') or d.get('state')}")
        if self.check is not None and wanted:
            try:
                self.check([d for _, d in wanted])
            except Exception as e:
                if first:
                    raise
                self.say(f"{', '.join(sorted({n.label for n, _ in wanted}))}: left out: {e}")
                return []
        stations = self._start_actors(wanted)
        if not first and stations:
            for n in {st.node.label: st.node for st in stations}.values():
                self.say(f"node {n.label} joined with {sum(st.node is n for st in stations)} device(s)")
        return stations

    def _start_actors(self, wanted: list[tuple[Node, dict[str, Any]]]) -> list[FarmStation]:
        """An actor per phone on the phone's node, all started at once; a phone whose actor
        cannot start is reported and left out."""
        pending: list[tuple[FarmStation, Any]] = []
        for node, d in wanted:
            actor = self._create(node, d)
            if actor is None:
                continue
            st = FarmStation(actor, node, d)
            pending.append((st, actor.hello.remote()))
        ready, _ = ray.wait([ref for _, ref in pending], num_returns=len(pending), timeout=START_TIMEOUT_S) \
            if pending else ([], [])
        stations = []
        for st, ref in pending:
            try:
                if ref not in ready:
                    raise FarmError(f"did not start within {START_TIMEOUT_S:g}s")
                hello = ray.get(ref)
                st.frames = hello.get("frames") or st.frames
                st.session = hello.get("session") or {}
                if hello.get("lock_note"):
                    self.say(hello["lock_note"])
            except (ray.exceptions.RayError, FarmError) as e:
                self.say(f"{st.name}: left out, its actor did not start: {_first_line(e)}")
                ray.kill(st.actor, no_restart=True)
                continue
            stations.append(st)
        return stations

    def _create(self, node: Node, d: dict[str, Any]) -> Any:
        """The phone's actor, named by node and serial in the harness's namespace, so no two runs
        ever drive one phone: a name still held (by the actor of a run that is ending, e.g. a
        killed driver's) is waited for, then the phone is left out as in use."""
        name = f"device:{node.node_id}:{d['serial']}"
        deadline = time.monotonic() + NAME_WAIT_S
        while True:
            try:
                return DeviceActor.options(name=name, namespace=NAMESPACE, scheduling_strategy=pinned(node.node_id)) \
                    .remote(d["serial"], self.device_config, self.plugins, self.secrets, f"{node.label}/{d['serial']}",
                            self.prepare, self.holder)
            except ValueError as e:  # "The name ... is already taken"
                if time.monotonic() > deadline:
                    self.say(f"{node.label}/{d['serial']}: left out, in use by another run ({e})")
                    return None
                time.sleep(0.5)

    def _watch(self) -> None:
        while not self._closing.wait(WATCH_S):
            try:
                new = [n for n in alive_nodes() if n["NodeID"] not in self.nodes]
                if not new:
                    continue
                stations = self._add_nodes(new)
            except Exception as e:  # the cluster may be going away; the run goes on with what it has
                if not self._closing.is_set():
                    self.say(f"farm: looking for new nodes failed: {_first_line(e)}")
                continue
            with self._lock:
                self.stations.extend(stations)
            for st in stations:
                self._joined.put(st)
            self.on_change()  # the manifest lists every node seen, with or without usable phones

    def sessions(self) -> dict[str, dict[str, Any]]:
        """What prepare did on each phone's node, by ``node/serial`` (for the manifest)."""
        with self._lock:
            return {st.name: st.session for st in self.stations}

    def restore(self) -> dict[str, dict[str, Any]]:
        """Every phone put back (once): each actor restores its own; a dead actor's phone is restored
        by a task pinned to its node. The restore reports by ``node/serial``; a node that cannot be
        reached has its report's ``failed`` saying where the journal is kept."""
        if self.restored is not None:
            return self.restored
        with self._lock:
            stations = list(self.stations)
        refs = {st.name: st.actor.close.remote() for st in stations}
        ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=RESTORE_TIMEOUT_S) if refs else ([], [])
        out: dict[str, dict[str, Any]] = {}
        orphans = []
        for st in stations:
            try:
                if refs[st.name] not in ready:
                    raise FarmError(f"did not answer within {RESTORE_TIMEOUT_S:g}s")
                out[st.name] = ray.get(refs[st.name])
            except (ray.exceptions.RayError, FarmError) as e:
                orphans.append((st, _first_line(e)))
        alive = {n["NodeID"] for n in alive_nodes()} if orphans else set()
        for st, why in orphans:  # the actor is gone; its node may not be
            try:
                if st.node.node_id not in alive:
                    raise FarmError("the node is gone")
                out[st.name] = ray.get(restore_on_node.options(scheduling_strategy=pinned(st.node.node_id))
                                       .remote(self.device_config, st.serial, self.holder), timeout=RESTORE_TIMEOUT_S)
                out[st.name]["after"] = f"its actor was lost ({why}); restored on node {st.node.label} from its journal"
            except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError, FarmError) as e:
                out[st.name] = {"serial": st.serial, "restored": [], "failed": [
                    {"what": "every recorded value", "error": f"node {st.node.label} cannot be reached "
                     f"({_first_line(e)}): the values stay recorded in the phone's journal there; run "
                     f"`harness devices restore {st.serial}` on that node"}]}
        self.restored = out
        return out

    def close(self) -> None:
        """Stop watching, put the phones back, end the actors, leave the cluster (it stays up for
        the next run)."""
        self._closing.set()
        watcher = getattr(self, "_watcher", None)
        if watcher is not None:
            watcher.join(timeout=5)  # a probe under way is abandoned with the connection
        if self.stations and ray.is_initialized():
            try:
                self.restore()
            except Exception as e:  # the cluster is going away: the journals on the nodes keep the originals
                self.say(f"farm: putting the phones back failed: {_first_line(e)}; run `harness devices restore` "
                         "on their nodes")
        for st in self.stations:
            try:
                ray.kill(st.actor, no_restart=True)
            except Exception:  # already gone with its node
                pass
        if ray.is_initialized():
            ray.shutdown()


def api_key_values(models: dict[str, Any]) -> dict[str, str]:
    """The API keys the driver would send to these endpoints (``harness.client.keys.key_for``: the named
    variable, or a provider's own for its own hosts), by variable name, for the actors."""
    from harness.client.keys import key_for

    out = {}
    for cfg in models.values():
        try:
            choice = key_for(cfg)
        except ValueError:  # a named variable that is unset: the run refused it before it got here
            continue
        if choice.key and choice.variable:
            out[choice.variable] = choice.key
    return out

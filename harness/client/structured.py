"""What each endpoint and model did with structured output (a JSON schema, vLLM's
``guided_json``, or plain text): the modes it refused and why, and the modes its calls used, for
the manifest (:func:`structured_report`); and :func:`forget_endpoint`, for a server replaced at
the same address."""

from __future__ import annotations

import threading
from typing import Any

from harness.client.slots import forget_slots


# what each endpoint AND model did with structured output: (base_url, model) -> the mode refused
# and why (a 400 naming response_format), and the modes its calls used, counted
_refused: dict[tuple[str, str], dict[str, str]] = {}
_modes_used: dict[tuple[str, str], dict[str, int]] = {}
_structured_lock = threading.Lock()


def forget_endpoint(base_url: str) -> None:
    """Forget what this process learned about ``base_url``: its slots (the largest ``concurrency``
    asked for so far) and which of its models refused structured output (and the modes they used).
    For a server replaced at the same address: a local port is given out again soon after it is
    closed (137 of 2,000 successive binds to port 0 here reused one), and a later server there is
    not the earlier one. Calls in flight keep the slots they hold; later calls get fresh ones."""
    forget_slots(base_url)
    with _structured_lock:
        for table in (_refused, _modes_used):
            for key in [k for k in table if k[0] == base_url]:
                del table[key]


def structured_report(since: dict[tuple[str, str], dict[str, int]] | None = None) -> list[dict[str, Any]]:
    """What structured output each endpoint and model used in the calls that asked for a schema
    (``[{"base_url", "model", "used": {mode: calls}, "refused": {mode: why}}]``), for manifests;
    with ``since`` (a :func:`structured_counts` taken earlier), only the calls made after it."""
    with _structured_lock:
        keys = sorted(set(_modes_used) | set(_refused))
        out = []
        for key in keys:
            used = dict(_modes_used.get(key, {}))
            if since is not None:
                used = {m: n - since.get(key, {}).get(m, 0) for m, n in used.items()}
                used = {m: n for m, n in used.items() if n > 0}
                if not used:
                    continue
            out.append({"base_url": key[0], "model": key[1], "used": used, "refused": dict(_refused.get(key, {}))})
        return out


def structured_counts() -> dict[tuple[str, str], dict[str, int]]:
    """The modes used so far, per endpoint and model (a mark for :func:`structured_report`)."""
    with _structured_lock:
        return {k: dict(v) for k, v in _modes_used.items()}


def count_mode(key: tuple[str, str], mode: str) -> None:
    """One more call of ``key`` (endpoint, model) that used ``mode``."""
    with _structured_lock:
        row = _modes_used.setdefault(key, {})
        row[mode] = row.get(mode, 0) + 1


def refused_modes(key: tuple[str, str]) -> dict[str, str]:
    """The structured-output modes ``key`` (endpoint, model) refused so far, and why."""
    return _refused.get(key, {})


def refuse_mode(key: tuple[str, str], mode: str, why: str) -> None:
    """Remember that ``key`` (endpoint, model) refused ``mode`` (a 400 naming it): later calls ask
    it in plain text."""
    with _structured_lock:
        _refused.setdefault(key, {})[mode] = why

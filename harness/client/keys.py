"""Which API key a model client sends, and where: the variable named by ``api_key_env`` when one is
named, else ``OPENAI_API_KEY`` for api.openai.com and ``DASHSCOPE_API_KEY`` for DashScope's hosts
only (over https); any other endpoint gets no Authorization header at all. A key is never stored
in a config's spec, a record, a log line or an exception message. Keys handed over by another
process (:func:`provide_keys`: a farm actor gets the driver's) are read ahead of the environment."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from harness.client.config import ModelConfig


# Which key goes where when no variable is named: each provider's variable only to its own hosts,
# and only over https. Hosts: OpenAI's API (platform.openai.com docs: https://api.openai.com/v1);
# DashScope's OpenAI-compatible mode (https://dashscope.aliyuncs.com/compatible-mode/v1 and the
# regional dashscope-intl / dashscope-us hosts, Alibaba Cloud Model Studio docs).
PROVIDER_KEYS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("OPENAI_API_KEY", re.compile(r"api\.openai\.com"), "api.openai.com"),
    ("DASHSCOPE_API_KEY", re.compile(r"dashscope(-[a-z0-9]+)?\.aliyuncs\.com"), "DashScope (dashscope*.aliyuncs.com)"),
)


def key_rule_text() -> str:
    """What :func:`key_for` does with no variable named, in words (the CLI's help texts use it)."""
    return " and ".join(f"{var} only to {where}" for var, _, where in PROVIDER_KEYS) + \
        ", over https only; no key to any other endpoint"


@dataclass(frozen=True)
class KeyChoice:
    """The key a client sends (None: no Authorization header) and why, for messages (never the key)."""

    key: str | None = field(repr=False)  # never in a repr, a log line or a traceback's locals dump
    variable: str | None = None
    reason: str = ""


# keys handed to this process by another (a farm actor gets the driver's), by variable name: read by
# key_for before the environment, and never put into os.environ (a subprocess would inherit them)
_PROVIDED_KEYS: dict[str, str] = {}


def provide_keys(values: dict[str, str]) -> None:
    """Make ``values`` (variable name -> key) what :func:`key_for` reads for those variables, ahead
    of this process's environment, without putting them in it."""
    _PROVIDED_KEYS.update(values)


def _key_variable(name: str) -> str | None:
    return _PROVIDED_KEYS.get(name) or os.environ.get(name)


def key_for(config: "ModelConfig") -> KeyChoice:
    """The API key for ``config``'s endpoint.

    A variable named by ``api_key_env`` is sent to that endpoint, whatever it is (an unset one is
    a ValueError: a named key that is missing is a mistake, not an anonymous call). With none
    named, ``OPENAI_API_KEY`` goes only to https://api.openai.com and ``DASHSCOPE_API_KEY`` only to
    DashScope's https hosts; every other endpoint (a local vLLM, a third-party judge) gets no key."""
    if config.api_key_env:
        value = _key_variable(config.api_key_env)
        if not value:
            raise ValueError(f"{config.base_url}: the API key variable {config.api_key_env} (--model-api-key-env / "
                             "--judge-api-key-env) is not set")
        return KeyChoice(value, config.api_key_env, f"{config.api_key_env} (named for this endpoint)")
    parts = urlsplit(config.base_url)
    host = (parts.hostname or "").lower()
    for var, pattern, where in PROVIDER_KEYS:
        if pattern.fullmatch(host):
            if parts.scheme != "https":
                return KeyChoice(None, None, f"no key: {var} goes to {where} over https only, not {parts.scheme}://")
            value = _key_variable(var)
            if value:
                return KeyChoice(value, var, f"{var} (the default for {where})")
            return KeyChoice(None, None, f"no key: {var} is not set")
    defaults = ", ".join(f"{var} only to {where}" for var, _, where in PROVIDER_KEYS)
    return KeyChoice(None, None, f"no key: {host or config.base_url} is not a provider with a default key ({defaults})")

"""The farm's one error: it cannot run (Ray missing, no cluster at the address, no usable phone)."""


class FarmError(Exception):
    """The farm cannot run: Ray missing, no cluster at the address, no usable phone on any node."""

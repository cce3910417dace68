"""Loopback names: what the local servers (``serve``, ``proxy``, the emulator) bind and answer.

A server without authentication binds a loopback address, but a web page can
still reach a loopback port through a DNS name rebound to 127.0.0.1. Such a
request carries the page's name in its ``Host`` header, so the servers answer
only requests whose ``Host`` names the loopback itself. One reading of both
rules, shared by every server, so they cannot drift apart.
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback", "is_loopback_host_header"]


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals (127.0.0.0/8, ``::1``,
    bracketed or not)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_loopback_host_header(value: str) -> bool:
    """True when a ``Host`` header (``name``, ``name:port``, ``[v6]:port``)
    names the loopback; false for any other name, an empty or malformed one."""
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return False
    else:
        name = value.partition(":")[0]
    return bool(name) and is_loopback(name)

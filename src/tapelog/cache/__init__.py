"""Prompt caches and wires as the providers document them: pure rules, segments and facts.

Domain code below the wires: the emulator accounts the requests it serves with
these functions and the cache audit simulates a log's rebuilt requests with the
same ones, so the two cannot disagree. Nothing here does I/O or imports a web
framework. docs/providers.md lists the rules and their sources; docs/emulator.md
the token estimate. The wire profiles (what each wire can do: structured-output
modes, thinking, tool rules) live here for the same reason: the loop and the
emulator read one set of facts (docs/providers.md, "Wire profiles").
"""

from tapelog.cache._profiles import WIRE_PROFILES, WireProfile
from tapelog.cache._providers import (
    DEFAULT_PROVIDER_CACHE,
    PROVIDER_CACHES,
    ProviderCache,
    register_provider_cache,
    unregister_provider_cache,
)

__all__ = [
    "DEFAULT_PROVIDER_CACHE",
    "PROVIDER_CACHES",
    "WIRE_PROFILES",
    "ProviderCache",
    "WireProfile",
    "register_provider_cache",
    "unregister_provider_cache",
]

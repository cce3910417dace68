"""Store commands: verify, show, sessions (owned by the store work)."""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []

"""Durable agent turns on DBOS: a turn is a workflow on a queue in PostgreSQL, run
by any worker on any machine, recovered by another when its worker dies, and
made exactly once by the log (docs/scale.md).

Install with ``pip install 'tapelog[dbos]'``; the ``dbos`` package is imported
when a worker starts or a turn queue is made, not when this package is.
"""

from tapelog.dbos._keyed import KeyedTurn, find_keyed_turn, run_keyed_turn
from tapelog.dbos._worker import AgentFactory, TurnQueue, Worker

__all__ = [
    "AgentFactory",
    "KeyedTurn",
    "TurnQueue",
    "Worker",
    "find_keyed_turn",
    "run_keyed_turn",
]

"""What the command line uses of the sessions index (``tapelog sessions`` lists
the rows ``tapelog serve`` shows, from the same index file)."""

from tapelog.serve._index import Row, SessionIndex, rows_bottom_line

__all__ = ["Row", "SessionIndex", "rows_bottom_line"]

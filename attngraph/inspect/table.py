"""Text tables whose columns stay aligned whatever the length of their cells (long module or parameter names)."""
from __future__ import annotations

from collections.abc import Sequence


def table(header: Sequence[str], rows: Sequence[Sequence[str]], left: Sequence[str] = ()) -> list[str]:
    """The lines of a table: each column as wide as its widest cell, the columns named in ``left`` aligned left and
    the others right, two spaces apart, trailing spaces dropped."""
    cells = [list(header)] + [list(row) for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return ["  ".join(c.ljust(w) if name in left else c.rjust(w) for name, c, w in zip(header, row, widths)).rstrip()
            for row in cells]

"""A console whose tables never cut a number or a name: a table wider than the terminal
even at its narrowest (every cell down to its longest word) is printed stacked, one block
per row of `header  value` lines, and the console says so."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text


def stacked(table: Table) -> Group:
    """`table` as one two-column block per row, headed by the row's first cell."""
    columns = table.columns
    cells = [list(c._cells) for c in columns]  # one list per column, rows in order
    rows = len(cells[0]) if cells else 0
    parts: list[RenderableType] = []
    if table.title:
        parts.append(
            Text.from_markup(table.title, justify="left")
            if isinstance(table.title, str)
            else table.title
        )
    parts.append(Text("(too wide for this terminal: one block per row)", style="dim"))
    for r in range(rows):
        parts.append(Text(""))
        block = Table(show_header=False, box=None, padding=(0, 1), pad_edge=False)
        block.add_column(style="bold", no_wrap=True)
        block.add_column(overflow="fold")
        for c, column in enumerate(columns):
            block.add_row(column.header, cells[c][r])
        parts.append(block)
    if table.caption:
        parts.append(
            Text.from_markup(table.caption) if isinstance(table.caption, str) else table.caption
        )
    return Group(*parts)


class FittingConsole(Console):
    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(self._fit(o) for o in objects), **kwargs)

    def _fit(self, obj: Any) -> Any:
        if isinstance(obj, Table) and obj.columns:
            # measured unbounded: at the console width rich reports what it would squeeze to
            narrowest = Measurement.get(self, self.options.update_width(10**4), obj).minimum
            if narrowest > self.width:
                return stacked(obj)
        return obj

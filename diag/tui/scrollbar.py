"""The scrollbars of `diag watch`, drawn in whole cells.

Textual draws a thumb's ends with partial-block glyphs (``▁`` .. ``▇``) over the track's colour; where that
colour does not show (NO_COLOR, a 16-colour terminal, ``tmux capture-pane``) they are stray glyphs at the
right edge of the pane. Whole cells in reverse video read as a thumb everywhere, coloured or not.
"""

from __future__ import annotations

from typing import ClassVar

from textual.scrollbar import ScrollBar, ScrollBarRender


class CellScrollBar(ScrollBarRender):
    """A scrollbar whose thumb is whole reverse-video cells: no glyph is drawn, only blanks."""

    VERTICAL_BARS: ClassVar[list[str]] = [" "] * len(ScrollBarRender.VERTICAL_BARS)
    HORIZONTAL_BARS: ClassVar[list[str]] = [" "] * len(ScrollBarRender.HORIZONTAL_BARS)


def use_cell_scrollbars() -> None:
    """Every scrollbar of the process draws as :class:`CellScrollBar` (the app's only Textual screen set)."""
    ScrollBar.renderer = CellScrollBar

"""The console every text output writes through (:func:`diag.options.console_for`): :class:`OutputConsole`.

No line of text output ends in whitespace. Rich pads table cells, grids and indented blocks to their
width; piped into a file or ``grep`` that padding is noise (a diff of two outputs, ``$`` in a pattern).
Every such console carries :class:`TrimLines`, so the emitters need not think of it. And a reader that
went away (``| head -1``) is the command's :func:`diag.options.quiet_pipe` to handle, not rich's exit 1."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderHook, RenderResult
from rich.segment import Segment


def rstripped(line: list[Segment]) -> list[Segment]:
    """The line's segments without the whitespace at its end (control segments, which move the cursor or
    set a title, are kept where they are)."""
    out = list(line)
    end = len(out)
    while end and (out[end - 1].control or not out[end - 1].text.rstrip()):
        end -= 1
    if end and out[end - 1].text != (text := out[end - 1].text.rstrip()):
        out[end - 1] = Segment(text, out[end - 1].style)
    return out[:end] + [s for s in out[end:] if s.control]


class _Trimmed:
    """A renderable drawn as rich draws it, each finished line without its trailing whitespace (a line
    without a newline yet, as ``print(..., end="")`` leaves it, is kept whole: more may follow on it)."""

    def __init__(self, renderable: ConsoleRenderable) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        soft = options.no_wrap and options.overflow == "ignore"   # print(soft_wrap=True): not cropped
        yield from _trim(console.render(self.renderable, options), None if soft else options.max_width)


def _trim(segments: Iterable[Segment], width: int | None) -> Iterable[Segment]:
    """Each ended line cut to ``width`` first, as the console will crop it (a table wider than the terminal
    cut inside a cell leaves that cell's padding at the end), then stripped; None: lines are not cropped."""
    for line, ended in Segment.split_lines_terminator(segments):
        if ended:
            yield from rstripped(Segment.adjust_line_length(line, width, pad=False)
                                 if width is not None and Segment.get_line_length(line) > width else line)
            yield Segment.line()
        else:
            yield from line


class TrimLines(RenderHook):
    """A console's render hook: everything it prints is drawn by :class:`_Trimmed`."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Trimmed(r) for r in renderables]


class OutputConsole(Console):
    """A rich console whose closed pipe is a :class:`BrokenPipeError` for :func:`diag.options.quiet_pipe`
    (output stops, the exit status stays the run's), where rich would exit 1 at once."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError

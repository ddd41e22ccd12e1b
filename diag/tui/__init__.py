"""`diag watch`: the live TUI. Only ``app``/``screens`` import Textual; ``state``,
``records`` and ``render`` are the headless core (``--once`` uses them without Textual)."""

WINDOWS = (1, 5, 15, 60)  # sparkline / plot windows, minutes (the --window values and the 1/5/15/60 keys)

"""`diag watch`: the live TUI. Only ``app``/``screens`` import Textual; ``state``, ``sources``,
``records`` and ``render`` are the headless core (``--once`` uses them without Textual)."""

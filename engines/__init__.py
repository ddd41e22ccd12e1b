"""The serving engines diag reads, one package per engine (``diag.engines.<name>``), each exposing
``ADAPTER``. Core reaches them only through :mod:`diag.parsers.engines`; this package imports nothing."""

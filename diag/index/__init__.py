"""The campaign index: ``diag index`` analyses every run under some roots once into a Parquet dataset
(:mod:`.build`, rows in :mod:`.rows`), one writer at a time and one whole generation at a time
(:mod:`.store`); ``diag runs`` and ``diag report INDEX`` read it (:mod:`.query`:
:func:`~diag.index.query.select_runs`). The dataset is documented in ``docs/index.md``."""

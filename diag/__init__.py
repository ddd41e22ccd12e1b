"""diag: why a disaggregated LLM-serving benchmark run is slow or broken."""

__version__ = "0.1.0"

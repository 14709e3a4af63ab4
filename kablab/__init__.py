"""kablab: collect, compare and report kernel A/B benchmark campaigns."""

__version__ = "0.1.0"

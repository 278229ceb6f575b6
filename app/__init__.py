"""Sweetspot: an observability dashboard for bandwidth-bound LLM serving."""

__version__ = "0.1.0"

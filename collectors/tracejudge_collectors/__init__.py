"""Collectors: bring spans into tracejudge's store. Found by tracejudge through entry points."""

__all__: list[str] = []  # each collector is its own subpackage (langfuse, otel, phoenix)

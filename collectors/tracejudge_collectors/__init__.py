"""Collectors: bring spans into tracejudge's store. Found by tracejudge through entry points."""

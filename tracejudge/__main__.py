"""``python -m tracejudge``."""

from tracejudge.cli import console_main

console_main()

"""``python -m tracejudge``."""

from tracejudge.cli import main

main()

"""OTLP/HTTP receiver and OTLP file reader."""

import click


@click.command("otlp")
def otlp_command() -> None:
    """Placeholder."""


@click.command("file")
def file_command() -> None:
    """Placeholder."""

"""Local stand-ins for real services, for tests, benchmarks and the offline demo.

Submodules: ``openai_server`` (an OpenAI-compatible HTTP server with scripted replies),
``langfuse_server`` and ``phoenix_server`` (Langfuse's and Phoenix's public APIs, every request and
response validated against the official OpenAPI specs, with fault injection).
"""

__all__: list[str] = []  # the stand-ins are imported by module (named above), not re-exported

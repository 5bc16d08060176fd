"""Local stand-ins for real services, for tests, benchmarks and the offline demo.

Submodules: ``openai_server`` (an OpenAI-compatible HTTP server with scripted replies) and
``langfuse_server`` (Langfuse's public API from its OpenAPI spec, with fault injection).
"""

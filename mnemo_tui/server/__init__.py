"""Provides `mnemo serve`: the embedded store over the REST dialect of WIRE.md (its own small ASGI layer,
`asgi.py`, under uvicorn; request bodies read by pydantic models, `bodies.py`)."""

"""Provides `mnemo serve`: the embedded store over the REST dialect of WIRE.md (a Starlette app, `app.py`, under
uvicorn; request bodies read by pydantic models, `bodies.py`)."""

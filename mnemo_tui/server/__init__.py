"""Provides `mnemo serve`: the embedded store over the REST dialect of docs/server.md (a Starlette app, `app.py`, under
uvicorn; request bodies read by pydantic models, `bodies.py`)."""

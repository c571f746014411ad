"""Provides `mnemo serve`: the embedded store over the REST dialect of WIRE.md (Starlette under uvicorn)."""

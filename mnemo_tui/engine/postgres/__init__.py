"""Provides the engine over PostgreSQL (psycopg 3 and psycopg_pool), for `mnemo serve` past one machine."""

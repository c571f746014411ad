"""Provides the agents' front end: `mnemo mcp`, an MCP server over stdio on the backend the CLI selected.

`surface` is the hosted package's tools, prompts and resource as data; `answers` words each answer over a
`Backend`; `sdk` (the one importer of the `mcp` SDK, an optional extra) serves them.
"""

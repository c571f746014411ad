"""Provides the agents' front end: `mnemo mcp`, an MCP server over stdio on the backend the CLI selected.

`surface` is the hosted package's tools, prompts and resource as data; `answers` words each answer over a
`Backend`, within `budget` (its size, through the CLI's sanitizer); `lines` holds the JSON-RPC rules for a stdin
line the SDK's reader lacks; `sdk` (the one importer of the `mcp` SDK, an optional extra) serves them.
"""

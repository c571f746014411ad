#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine: system tools (when apt is there and we may
# use it), then a virtual environment in .venv with the project and its dev extra, at the pinned
# versions of constraints.txt. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

need=()
command -v sqlite3 >/dev/null 2>&1 || need+=(sqlite3)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v jq >/dev/null 2>&1 || need+=(jq)  # the README's usage examples pipe NDJSON into jq
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v wrk >/dev/null 2>&1 || need+=(wrk)  # the server load benchmark (benchmarks/bench_wrk.py); the tests do not need it
command -v rsvg-convert >/dev/null 2>&1 || need+=(librsvg2-bin)
# the PostgreSQL engine's tests start their own cluster with the server binaries (initdb, pg_ctl)
ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || command -v pg_ctl >/dev/null 2>&1 || need+=(postgresql)
[ -e /usr/share/fonts/truetype/firacode ] || [ -e /usr/share/fonts/opentype/firacode ] || need+=(fonts-firacode)
if [ ${#need[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "setup-dev: installing ${need[*]}" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null) \
      || echo "setup-dev: could not install ${need[*]}; the tests that need them will be skipped" >&2
  else
    echo "setup-dev: missing ${need[*]} (install them for the full suite)" >&2
  fi
fi

python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -c constraints.txt -e '.[dev]'
echo "setup-dev: ready; run the tests with $VENV/bin/python -m pytest -n 2" >&2

#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine: system tools (when apt is there and we may
# use it), then a virtual environment in .venv with the project and its dev extra, at the pinned
# versions of constraints.txt. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

# What the tests need: without it they would skip, and CI (CI=true) fails on any skip.
need=()
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v jq >/dev/null 2>&1 || need+=(jq)  # the README's usage examples pipe NDJSON into jq
command -v openssl >/dev/null 2>&1 || need+=(openssl)  # a self-signed certificate for the TLS test
command -v unshare >/dev/null 2>&1 || need+=(util-linux)  # the read-only mount test, as root
# the PostgreSQL engine's tests start their own cluster with the server binaries (initdb, pg_ctl)
ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || command -v pg_ctl >/dev/null 2>&1 || need+=(postgresql)
# ... and put pgbouncer (transaction mode) in front of it for the pooler tests (issue 41)
command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || need+=(pgbouncer)
# the MCP Inspector CLI drives `/mcp` of a real server (tests/agents/test_mcp_http.py): Node and npm
command -v npm >/dev/null 2>&1 || need+=(npm)
# ... and Prometheus's promtool checks the text of GET /metrics (issue 63)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
# What the benchmarks and screenshots use; the tests do not.
want=()
command -v sqlite3 >/dev/null 2>&1 || want+=(sqlite3)
command -v curl >/dev/null 2>&1 || want+=(curl)
command -v wrk >/dev/null 2>&1 || want+=(wrk)  # the server load benchmark (benchmarks/bench_wrk.py)
command -v rsvg-convert >/dev/null 2>&1 || want+=(librsvg2-bin)
[ -e /usr/share/fonts/truetype/firacode ] || [ -e /usr/share/fonts/opentype/firacode ] || want+=(fonts-firacode)
apt_install() {
  command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ] || return 1
  echo "setup-dev: installing $*" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
if [ ${#want[@]} -gt 0 ]; then
  apt_install "${want[@]}" || echo "setup-dev: missing ${want[*]} (the benchmarks and screenshots use them)" >&2
fi
if [ ${#need[@]} -gt 0 ] && ! apt_install "${need[@]}"; then
  echo "setup-dev: cannot install ${need[*]}, which the tests need; install them and run again" >&2
  exit 1
fi

python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -c constraints.txt -e '.[dev]'
# The MCP Inspector CLI, pinned, into a project-local folder (.tools, gitignored), from the npm registry, with
# the Node it needs (22.19 or later; the registry's node-linux-* package, whatever Node runs npm itself).
# No install scripts: the Inspector's one installs its clients in a source checkout, a no-op here.
case "$(uname -m)" in
  x86_64) node_arch=x64 ;;
  aarch64 | arm64) node_arch=arm64 ;;
  *) node_arch="$(uname -m)" ;;
esac
npm install --no-audit --no-fund --silent --ignore-scripts --prefix .tools \
  "node-linux-$node_arch@22.23.5" "@modelcontextprotocol/inspector@2.12.0" >/dev/null
echo "setup-dev: ready; run the tests with $VENV/bin/python -m pytest -n 2" >&2

"""Provides the programs `bench_follow.py` runs in child processes: `mnemo serve` without the follow route, and
1,000 raw followers in one asyncio process (each run as `python -c PROGRAM ARGS`)."""

# `mnemo serve` as it is, except that `POST /memory/follow` is not routed: the app's own 404 answers it
# (as the hosted service would), so the same client polls. Everything else (edges, log, engine) is serve's.
NO_FOLLOW_PROGRAM = r"""
import sys
from pathlib import Path
from mnemo_tui.server import run

class NoFollow:
    def __init__(self, app):
        self.app = app
    def __getattr__(self, name):
        return getattr(self.app, name)
    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"].endswith("/memory/follow"):
            path = scope["path"] + "-not-offered"
            scope = dict(scope, path=path, raw_path=path.encode())
        await self.app(scope, receive, send)

_create = run.create_app
run.create_app = lambda *a, **k: NoFollow(_create(*a, **k))
sys.exit(run.serve(Path(sys.argv[1]), port=0))
"""

# The 1,000 idle followers: raw HTTP/1.1 requests on asyncio streams from one process, their answers
# scanned line by line, not parsed (one event is one chunk of the chunked answer, so its lines are
# whole): a client this light keeps its own share of the measured delays small. Prints `open N` once
# every stream has its first event; on `go`, idles WINDOW seconds and prints one JSON line of the
# heartbeats each stream received meanwhile; on `fan`, notes when each stream receives each entry
# (monotonic clock, the same across processes); on `end IDS`, waits (bounded) until every stream has
# every one of IDS and prints the arrivals as one JSON line.
FOLLOWERS_PROGRAM = r"""
import asyncio, json, re, resource, sys, time
from urllib.parse import urlsplit

url, keys, n, window = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
where = urlsplit(url)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
ATOM = re.compile(rb'"atom_id":"([^"]+)"')
opened, counts, failures = 0, [], []
all_open, more = asyncio.Event(), asyncio.Event()
stage = ["open"]
arrivals = {}  # atom_id -> [monotonic time it reached a stream, ...]

async def follow(key):
    global opened
    got = {"in_window": 0, "first": False}
    counts.append(got)
    try:
        reader, writer = await asyncio.open_connection(where.hostname, where.port, limit=1 << 22)
        body = b"{}"
        head = (f"POST {where.path}/memory/follow HTTP/1.1\r\nHost: {where.netloc}\r\nX-Api-Key: {key}\r\n"
                f"Accept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
        writer.write(head.encode() + body)
        status = await reader.readline()
        if b" 200 " not in status:
            failures.append(status.decode(errors="replace").strip())
            writer.close()
            return
        while True:
            line = await reader.readline()
            if not line:
                failures.append("the stream ended")
                return
            if line.startswith(b"event:"):
                if line.startswith(b"event: heartbeat"):
                    got["in_window"] += stage[0] == "idle"
                if not got["first"]:
                    got["first"] = True
                    opened += 1
                    if opened == n:
                        all_open.set()
            elif stage[0] == "fan" and line.startswith(b"data:"):
                at = time.monotonic()
                for atom in ATOM.findall(line):
                    arrivals.setdefault(atom.decode(), []).append(at)
                more.set()
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
        failures.append(f"{type(exc).__name__}: {exc}")

async def main():
    tasks = []
    for i in range(n):
        tasks.append(asyncio.create_task(follow(keys[i % len(keys)])))
        if i % 50 == 49:
            await asyncio.sleep(0.05)
    try:
        await asyncio.wait_for(all_open.wait(), 120)
    except TimeoutError:
        pass
    print(f"open {opened} {len(failures)}", flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # `go`: the parent has read the server's memory
    stage[0] = "idle"
    await asyncio.sleep(window)
    stage[0] = "after"
    print(json.dumps({"opened": opened, "failures": failures[:5], "n_failures": len(failures),
                      "heartbeats": [c["in_window"] for c in counts]}), flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # `fan`
    stage[0] = "fan"
    print("fanning", flush=True)
    wanted = json.loads((await asyncio.to_thread(sys.stdin.readline)).split(" ", 1)[1])  # `end IDS`
    end = time.monotonic() + 60
    while any(len(arrivals.get(a, ())) < opened for a in wanted) and time.monotonic() < end:
        more.clear()
        try:
            await asyncio.wait_for(more.wait(), 1)
        except TimeoutError:
            pass
    stage[0] = "after"
    print(json.dumps(arrivals), flush=True)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

asyncio.run(main())
"""

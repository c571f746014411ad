"""`mnemo mcp` over stdio driven with hand-written JSON lines (the security tests' hostile MCP client)."""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import IO, Any

from mnemo_tui.limits import loads
from tests.support.cli import MNEMO


class RawMcp:
    """`mnemo mcp` spoken to line by line, as a client that writes its own JSON would."""

    def __init__(self, home: Path) -> None:
        env = {"PATH": os.environ.get("PATH", ""), "MNEMO_HOME": str(home), "NO_COLOR": "1"}
        self.proc = subprocess.Popen(
            [MNEMO, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        assert self.proc.stdout is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()
        self.next_id = 0

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def ask(self, method: str, params: bytes) -> dict[str, Any]:
        self.next_id += 1
        self.send(b'{"jsonrpc":"2.0","id":%d,"method":"%s","params":%s}' % (self.next_id, method.encode(), params))
        while True:
            line = self.lines.get(timeout=60)  # bounded: a server that never answers fails the test
            assert line, "mnemo mcp closed its stdout"
            answer: dict[str, Any] = loads(line)
            if answer.get("id") == self.next_id:
                return answer

    def close(self) -> str:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        return self.proc.stderr.read().decode()

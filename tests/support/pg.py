"""A real PostgreSQL for the tests: one cluster per test process (xdist worker), a database per test from a template.

The cluster is `initdb`-ed into a temporary folder owned by the `postgres` system user and run
with `runuser -u postgres -- pg_ctl` when the tests run as root (CI does; `initdb` refuses root),
or as the current user otherwise. It listens on a free 127.0.0.1 port and a socket in its folder;
host connections need a password (scram), so the tests can prove a URL's password never shows.
"""

from __future__ import annotations

import glob
import os
import pwd
import queue
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

PASSWORD = "pw-" + secrets.token_hex(8)  # the tests look for it in every output, log and error
USER = "mnemo"


def binaries() -> Path | None:
    """The folder of the PostgreSQL server binaries (initdb, pg_ctl), or None when there are none."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).parent if pg_ctl else None


NO_POSTGRES = (
    "no PostgreSQL server binaries (initdb, pg_ctl) on this machine: scripts/setup-dev.sh installs Debian's postgresql"
)


def _free_port() -> int:
    """A port free now (postgres must be told one; `start_cluster` retries when it was taken meanwhile)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    """A running cluster of the tests: `url(db)` for the mnemo role (with its password), `admin` for setup."""

    folder: Path
    bindir: Path
    port: int
    as_postgres: bool
    # The tests' clusters commit without waiting for a disk; a failover test's primary waits for its standby.
    options: str = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=check, timeout=120)

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def url(self, dbname: str, password: str | None = PASSWORD) -> str:
        secret = f":{password}" if password is not None else ""
        return f"postgresql://{USER}{secret}@127.0.0.1:{self.port}/{dbname}"

    def admin_url(self, dbname: str = "postgres") -> str:
        owner = "postgres" if self.as_postgres else pwd.getpwuid(os.getuid()).pw_name
        return f"host={self.folder} port={self.port} user={owner} dbname={dbname}"

    def start(self) -> None:
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.folder / "log"),
            "-w",
            "-t",
            "60",
            "-o",
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c max_connections=200 {self.options}",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)


def _folder(as_postgres: bool) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="mnemo-pg-"))
    if as_postgres:
        pw = pwd.getpwnam("postgres")
        os.chown(folder, pw.pw_uid, pw.pw_gid)
    os.chmod(folder, 0o700)
    return folder


def start_cluster(options: str | None = None) -> Cluster:
    """initdb and start a fresh cluster (bounded: each step has a timeout); `options`: postgres's `-c` settings."""
    bindir = binaries()
    assert bindir is not None
    as_postgres = os.getuid() == 0
    folder = _folder(as_postgres)
    cluster = Cluster(folder, bindir, _free_port(), as_postgres)
    if options is not None:
        cluster.options = options
    pwfile = folder / "pw"
    pwfile.write_text("postgres-" + secrets.token_hex(8) + "\n")
    if as_postgres:
        os.chown(pwfile, pwd.getpwnam("postgres").pw_uid, -1)
    cluster._run(
        "initdb",
        "-D",
        str(cluster.data),
        "--auth-local=trust",
        "--auth-host=scram-sha-256",
        f"--pwfile={pwfile}",
        "--no-sync",
        "-E",
        "UTF8",
        "--locale=C.UTF-8",
    )
    _start_on_a_free_port(cluster)
    import psycopg

    with psycopg.connect(cluster.admin_url(), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {USER} LOGIN CREATEDB PASSWORD '{PASSWORD}'")
        conn.execute(f"CREATE DATABASE mnemo_template OWNER {USER}")
    from mnemo_tui.engine.postgres.migrations import migrate

    migrate(cluster.url("mnemo_template"), allowed=True)
    return cluster


def _start_on_a_free_port(cluster: Cluster) -> None:
    # postgres binds the port itself (`-p`): one picked free may be taken by another test process
    # before the cluster starts; then the log says so and the cluster starts again on another port.
    for attempt in range(5):
        try:
            cluster.start()
            break
        except subprocess.CalledProcessError:
            log = cluster.folder / "log"
            if attempt == 4 or "already in use" not in (log.read_text(errors="replace") if log.exists() else ""):
                raise
            log.unlink()
            cluster.port = _free_port()


def start_standby(primary: Cluster) -> Cluster:
    """A synchronous standby of `primary`: `pg_basebackup -R` (streaming, hot standby), started on its own port,
    and the primary told to wait for it at every commit (`synchronous_standby_names`); returns once it is sync."""
    import psycopg

    standby = Cluster(_folder(primary.as_postgres), primary.bindir, _free_port(), primary.as_postgres, options="")
    owner = "postgres" if primary.as_postgres else pwd.getpwuid(os.getuid()).pw_name
    primary._run(
        "pg_basebackup", "-D", str(standby.data), "-R", "-X", "stream", "--checkpoint=fast", "--no-sync",
        "-h", str(primary.folder), "-p", str(primary.port), "-U", owner,
    )  # fmt: skip
    _start_on_a_free_port(standby)
    with psycopg.connect(primary.admin_url(), autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
        conn.execute("SELECT pg_reload_conf()")
        for _ in range(600):  # bounded: streaming and synchronous within a minute
            if conn.execute("SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync'").fetchone():
                return standby
            threading.Event().wait(0.1)
    raise AssertionError("the standby never became synchronous")


class Databases:
    """Fresh databases of one cluster, each a copy of the migrated template with a cursor secret of its own.

    A thread keeps `AHEAD` of them made in advance, so a test rarely waits for one.
    """

    AHEAD = 2

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.count = 0
        self.lock = threading.Lock()
        self.ready: queue.Queue[str] = queue.Queue(maxsize=self.AHEAD)
        self.stopping = threading.Event()
        self.maker = threading.Thread(target=self._make_ahead, daemon=True)
        self.maker.start()

    def _make_ahead(self) -> None:
        while not self.stopping.is_set():
            try:
                name = self._create("mnemo_template")
            except Exception:  # noqa: BLE001 - the cluster restarted under a test (AdminShutdown, refused): again
                self.stopping.wait(0.2)
                continue
            while not self.stopping.is_set():
                try:
                    self.ready.put(name, timeout=0.5)
                    break
                except queue.Full:
                    continue

    def close(self) -> None:
        self.stopping.set()
        self.maker.join(timeout=30)

    def create(self, *, template: str = "mnemo_template") -> str:
        """A fresh database (a copy of the migrated template unless told otherwise)."""
        if template == "mnemo_template":
            try:
                return self.ready.get(timeout=5)
            except queue.Empty:  # the maker is behind (a test restarted the cluster): make one here
                pass
        return self._create(template)

    def _create(self, template: str) -> str:
        import psycopg

        with self.lock:
            self.count += 1
            name = f"t{os.getpid()}_{self.count}"
        with psycopg.connect(self.cluster.admin_url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {template} OWNER {USER} STRATEGY FILE_COPY")
        if template == "mnemo_template":
            with psycopg.connect(self.cluster.admin_url(name), autocommit=True) as conn:
                conn.execute("UPDATE meta SET value = %s WHERE key = 'cursor_secret'", (secrets.token_bytes(32),))
                conn.execute("UPDATE meta SET value = %s WHERE key = 'store_id'", (secrets.token_hex(8).encode(),))
        return name

    def empty(self) -> str:
        """A database with no mnemo schema at all."""
        return self.create(template="template0")

    def drop(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.cluster.admin_url(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def client_sockets(port: int) -> set[str]:
    """This process's open TCP sockets connected to `port` (their inodes), from /proc (Linux).

    Seen from the client, not the server: a connection left halfway through its authentication is not
    in the server's `pg_stat_activity` (a backend is listed once authenticated), yet its process holds
    up a DROP DATABASE until `authentication_timeout` (60 s)."""
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile (the listing's own descriptor)
            continue
        if target.startswith("socket:["):
            mine.add(target[len("socket:[") : -1])
    found = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        if not os.path.exists(table):
            continue
        with open(table) as lines:
            next(lines)  # the header
            for line in lines:
                fields = line.split()
                remote, inode = fields[2], fields[9]
                if int(remote.rsplit(":", 1)[1], 16) == port and inode in mine:
                    found.add(inode)
    return found


NO_PGBOUNCER = "no pgbouncer on this machine: scripts/setup-dev.sh installs Debian's pgbouncer"
BOUNCER_INI = """[databases]
* = host=127.0.0.1 port={backend}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = scram-sha-256
auth_file = {folder}/userlist.txt
pool_mode = transaction
max_client_conn = 400
default_pool_size = 10
server_idle_timeout = 10
logfile = {folder}/log
"""


@dataclass
class Bouncer:
    """pgbouncer in transaction mode in front of a test cluster: `url(db)` as `Cluster.url`, through it."""

    folder: Path
    port: int
    proc: subprocess.Popen[bytes]

    def url(self, dbname: str, password: str | None = PASSWORD) -> str:
        secret = f":{password}" if password is not None else ""
        return f"postgresql://{USER}{secret}@127.0.0.1:{self.port}/{dbname}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=20)
        shutil.rmtree(self.folder, ignore_errors=True)


def start_bouncer(cluster: Cluster) -> Bouncer:
    """Start pgbouncer in transaction mode on a free port in front of `cluster` (every database, the mnemo role).

    It refuses to run as root: run as the `postgres` user then, as the cluster is. It binds the port
    itself, so a port taken meanwhile by another test process is retried on another, as `start_cluster` does.
    """
    import psycopg

    program = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    folder = Path(tempfile.mkdtemp(prefix="mnemo-bouncer-"))
    as_postgres = os.getuid() == 0
    ids = pwd.getpwnam("postgres") if as_postgres else None
    (folder / "userlist.txt").write_text(f'"{USER}" "{PASSWORD}"\n')
    os.chmod(folder / "userlist.txt", 0o600)
    if ids is not None:
        for path in (folder, folder / "userlist.txt"):
            os.chown(path, ids.pw_uid, ids.pw_gid)
    for attempt in range(5):
        port = _free_port()
        (folder / "pgbouncer.ini").write_text(BOUNCER_INI.format(backend=cluster.port, port=port, folder=folder))
        (folder / "log").unlink(missing_ok=True)
        proc = subprocess.Popen(
            [program, str(folder / "pgbouncer.ini")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            user=ids.pw_uid if ids else None,
            group=ids.pw_gid if ids else None,
            extra_groups=[] if ids else None,
        )
        bouncer = Bouncer(folder, port, proc)
        for _ in range(300):  # bounded: up at once, or dead (its log says why)
            if proc.poll() is not None:
                break
            try:
                # Not the template: a server connection to it would hold up every CREATE DATABASE copying it.
                psycopg.connect(bouncer.url("postgres"), connect_timeout=2).close()
                return bouncer
            except psycopg.OperationalError:
                threading.Event().wait(0.05)
        log = (folder / "log").read_text(errors="replace") if (folder / "log").exists() else ""
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=20)
        if attempt == 4 or "in use" not in log:
            shutil.rmtree(folder, ignore_errors=True)
            raise RuntimeError("pgbouncer did not start: " + log[-2000:])
    raise AssertionError("unreachable")


def stop_cluster(cluster: Cluster, databases: Databases | None = None) -> None:
    if databases is not None:
        databases.close()
    cluster.stop("immediate")
    shutil.rmtree(cluster.folder, ignore_errors=True)

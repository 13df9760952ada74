"""A PostgreSQL primary and its streaming replica of the tests' own, from Debian's PostgreSQL binaries.

The shared server the suite uses cannot be given a replica (its WAL level, replication slots and pg_hba are not the
suite's to change), so tests/replica starts a pair of its own on free ports of 127.0.0.1: `initdb` a primary (WAL level
`replica` and the replication line of pg_hba are initdb's defaults), give it the test database's schema and rows
(`pg_dump` of the shared test database), then `pg_basebackup -R` a standby from it and start both. Under root the
servers run as Debian's `postgres` user, in a directory it owns. `pg_ctl` starts and stops each server by its data
directory, so only these two are ever stopped.
"""

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from tests.faults.processes import free_port

BIN = Path("/usr/lib/postgresql/15/bin")
USER = "postgres"  # the servers' superuser, and the system user they run as under root
TEMPLATE = "payments_template"  # the test database's copy, from which each test's database is made


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", USER, "--", *argv] if os.geteuid() == 0 else argv


def _run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(_as_server_user(argv), capture_output=True, text=True, timeout=120, **kwargs)
    if done.returncode:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stdout}{done.stderr}")
    return done


class Server:
    """One PostgreSQL server of the pair: its data directory, port and log."""

    def __init__(self, workdir: Path, name: str):
        self.name, self.workdir = name, workdir
        self.pgdata, self.log, self.port = workdir / name, workdir / f"{name}.log", free_port()

    def start(self) -> None:
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.workdir} "
                   "-c fsync=off -c full_page_writes=off -c hot_standby=on -c wal_receiver_status_interval=1")
        _run([str(BIN / "pg_ctl"), "-D", str(self.pgdata), "-l", str(self.log), "-o", options, "-w", "-t", "60",
              "start"])

    def stop(self, mode: str = "fast") -> None:
        """`fast`: its sessions are ended, as a restart or a failover ends them."""
        if self.running():
            _run([str(BIN / "pg_ctl"), "-D", str(self.pgdata), "-m", mode, "-w", "stop"])

    def running(self) -> bool:
        done = subprocess.run(_as_server_user([str(BIN / "pg_ctl"), "-D", str(self.pgdata), "status"]),
                              capture_output=True, text=True, timeout=30)
        return done.returncode == 0

    def url(self, database: str) -> str:
        return f"postgres://{USER}@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str, params=(), *, database: str = "postgres"):
        """One statement in autocommit; its first row (None for a statement that returns none)."""
        with psycopg.connect(host="127.0.0.1", port=self.port, dbname=database, user=USER, autocommit=True,
                             connect_timeout=5) as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchone() if cursor.description else None


class StreamingPair:
    """A primary and a hot standby streaming from it."""

    def __init__(self):
        self.workdir = Path(tempfile.mkdtemp(prefix="replica-pair-"))
        if os.geteuid() == 0:
            shutil.chown(self.workdir, USER, USER)
        self.primary, self.replica = Server(self.workdir, "primary"), Server(self.workdir, "replica")

    def start(self, *, source_database: str, source_port: int = 5432) -> "StreamingPair":
        """The primary, TEMPLATE a copy of `source_database` of the shared server, then the standby; a failure on
        the way stops what was started."""
        try:
            return self._start(source_database, source_port)
        except BaseException:
            self.stop()
            raise

    def _start(self, source_database: str, source_port: int) -> "StreamingPair":
        _run([str(BIN / "initdb"), "-D", str(self.primary.pgdata), "-U", USER, "-A", "trust", "--no-sync",
              "-E", "UTF8", "--locale", "C"])
        self.primary.start()
        self.primary.execute(f"CREATE DATABASE {TEMPLATE}")
        dump = subprocess.run(["pg_dump", "-h", "127.0.0.1", "-p", str(source_port), "-U", USER, "--no-owner",
                               "--no-privileges", source_database], capture_output=True, check=True, timeout=120)
        subprocess.run([str(BIN / "psql"), "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", USER, "-q",
                        "-v", "ON_ERROR_STOP=1", "-d", TEMPLATE], input=dump.stdout, capture_output=True, check=True,
                       timeout=120)
        _run([str(BIN / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", USER,
              "-D", str(self.replica.pgdata), "-R", "-X", "stream", "--checkpoint=fast", "--no-sync"])
        self.replica.start()
        return self

    def stop(self) -> None:
        for server in (self.replica, self.primary):
            if server.pgdata.exists():
                server.stop("immediate")
        shutil.rmtree(self.workdir, ignore_errors=True)

    def new_database(self, name: str) -> None:
        """A database copied from TEMPLATE on the primary, once the replica has it too."""
        self.primary.execute(f"DROP DATABASE IF EXISTS {name}")
        self.primary.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        self.wait_caught_up()

    def drop_database(self, name: str) -> None:
        self.primary.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def wait_caught_up(self, timeout: float = 30) -> None:
        """Until the replica has replayed all the WAL the primary has flushed now."""
        position = self.primary.execute("SELECT pg_current_wal_flush_lsn()")[0]
        deadline = time.monotonic() + timeout
        while not self.replica.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (position,))[0]:
            if time.monotonic() > deadline:
                raise AssertionError(f"the replica did not reach {position} in {timeout} s")
            time.sleep(0.05)

    def pause_replay(self) -> None:
        """The replica keeps receiving WAL but applies none of it: reads there stay at this moment."""
        self.replica.execute("SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        self.replica.execute("SELECT pg_wal_replay_resume()")

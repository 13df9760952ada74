"""RabbitMQ for the tests: a virtual host of a test's own on the machine's RabbitMQ (127.0.0.1:5672, guest/guest, as on
CI), whose queues, exchanges and native delayed delivery's exchanges are the vhost's, so parallel runs never share a
queue; and a node of a drill's own (`RabbitNode`), which the drill may kill and start again without touching the
machine's broker. Both are driven with rabbitmqctl."""

import os
import secrets
import shutil
import subprocess
from pathlib import Path

RABBITMQ_HOST = os.environ.get("RABBITMQ_HOST", "127.0.0.1:5672")
RABBITMQCTL = shutil.which("rabbitmqctl") or "/usr/sbin/rabbitmqctl"
# Debian's scripts themselves: /usr/sbin's wrappers switch to the rabbitmq user, its HOME and so its Erlang cookie.
RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")


def rabbitmqctl(*argv: str, node: "RabbitNode | None" = None) -> str:
    """rabbitmqctl against the machine's RabbitMQ, or against `node`."""
    command = [str(RABBITMQ_BIN / "rabbitmqctl"), "-n", node.name] if node else [RABBITMQCTL]
    done = subprocess.run([*command, "-q", *argv], capture_output=True, text=True, timeout=60,
                          env=node.env if node else None)
    if done.returncode:
        raise RuntimeError(f"rabbitmqctl {' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def queue_counts(vhost: str, node: "RabbitNode | None" = None) -> dict[str, dict]:
    """Each queue of `vhost` by name: its type (classic, quorum), messages ready and unacknowledged."""
    out = rabbitmqctl("list_queues", "-p", vhost, "--no-table-headers", "name", "type", "messages_ready",
                      "messages_unacknowledged", node=node)
    rows = (line.split("\t") for line in out.splitlines() if line.strip())
    return {name: {"type": kind, "ready": int(ready), "unacked": int(unacked)} for name, kind, ready, unacked in rows}


class RabbitVhost:
    def __init__(self, label: str = "test"):
        self.name = f"payments-{label}-{os.getpid()}-{secrets.token_hex(3)}"

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@{RABBITMQ_HOST}/{self.name}"

    def url_through(self, port: int) -> str:
        """The vhost reached through a TCP forwarder on 127.0.0.1:`port` (tests/faults/tcp_gate.py)."""
        return f"amqp://guest:guest@127.0.0.1:{port}/{self.name}"

    def create(self) -> "RabbitVhost":
        rabbitmqctl("add_vhost", self.name)
        rabbitmqctl("set_permissions", "-p", self.name, "guest", ".*", ".*", ".*")
        return self

    def delete(self) -> None:
        rabbitmqctl("delete_vhost", self.name)

    def queues(self) -> dict[str, dict]:
        return queue_counts(self.name)


class RabbitNode:
    """A RabbitMQ node of its own from Debian's rabbitmq-server: its node name, AMQP and distribution ports on
    127.0.0.1, its data (Mnesia and the quorum queues' logs), logs, configuration and Erlang cookie under `base`. epmd
    is the machine's. `command()` and `env` start it (through a launcher that can kill its process group); the data
    stays between starts, as a restarted server's does."""

    def __init__(self, base: Path, *, port: int, dist_port: int):
        self.port, self.dist_port = port, dist_port
        self.name = f"drill-{port}@localhost"
        for folder in ("home", "mnesia", "log"):
            (base / folder).mkdir(parents=True, exist_ok=True)
        (base / "rabbitmq-env.conf").write_text("")  # not the machine's /etc/rabbitmq/rabbitmq-env.conf (its NODENAME)
        (base / "rabbitmq.conf").write_text("")
        (base / "enabled_plugins").write_text("[].\n")
        self.env = {
            **os.environ, "HOME": str(base / "home"),  # the node's and rabbitmqctl's Erlang cookie
            "RABBITMQ_CONF_ENV_FILE": str(base / "rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
            "RABBITMQ_NODENAME": self.name, "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(port), "RABBITMQ_DIST_PORT": str(dist_port),
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"), "RABBITMQ_LOG_BASE": str(base / "log"),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }

    # The server prints this on its standard output once its listeners accept connections.
    READY_LINE = "Starting broker... completed"

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}//"

    def command(self) -> list[str]:
        return [str(RABBITMQ_BIN / "rabbitmq-server")]

    def queues(self, vhost: str = "/") -> dict[str, dict]:
        return queue_counts(vhost, self)

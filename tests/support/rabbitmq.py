"""A RabbitMQ virtual host of a test's own on the machine's RabbitMQ (127.0.0.1:5672, guest/guest, as on CI): its
queues, exchanges and the native delayed delivery's exchanges are the vhost's, so parallel runs never share a queue.
Made and removed with rabbitmqctl."""

import os
import secrets
import shutil
import subprocess

RABBITMQ_HOST = os.environ.get("RABBITMQ_HOST", "127.0.0.1:5672")
RABBITMQCTL = shutil.which("rabbitmqctl") or "/usr/sbin/rabbitmqctl"


def _rabbitmqctl(*argv: str) -> str:
    done = subprocess.run([RABBITMQCTL, "-q", *argv], capture_output=True, text=True, timeout=60)
    if done.returncode:
        raise RuntimeError(f"rabbitmqctl {' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


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
        _rabbitmqctl("add_vhost", self.name)
        _rabbitmqctl("set_permissions", "-p", self.name, "guest", ".*", ".*", ".*")
        return self

    def delete(self) -> None:
        _rabbitmqctl("delete_vhost", self.name)

    def queues(self) -> dict[str, dict]:
        """Each queue of the vhost by name: its type (classic, quorum), messages ready and unacknowledged."""
        out = _rabbitmqctl("list_queues", "-p", self.name, "--no-table-headers", "name", "type", "messages_ready",
                           "messages_unacknowledged")
        rows = (line.split("\t") for line in out.splitlines() if line.strip())
        return {name: {"type": kind, "ready": int(ready), "unacked": int(unacked)}
                for name, kind, ready, unacked in rows}

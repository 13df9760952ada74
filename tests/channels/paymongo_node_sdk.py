"""PayMongo's official SDK is for Node (paymongo-node): installed with npm from the pinned package.json and
package-lock.json in tests/channels/paymongo_node into var/paymongo-node (gitignored), then its check.js run against
the emulator (tests/channels/test_paymongo_node_sdk.py), and on every webhook any PayMongo test's emulator signed
(tests/channels/conftest.py). npm reaches the registry once per clean checkout; later runs
find the installed tree."""

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

from django.conf import settings

SOURCE = Path(__file__).parent / "paymongo_node"
PINNED = ("package.json", "package-lock.json")


def node_sdk_folder() -> Path:
    """var/paymongo-node with `npm ci` done for the pinned files; done again whenever they changed. One installer at
    a time (a file lock): the suite's parallel workers may all ask at once."""
    folder = Path(settings.VAR_DIR) / "paymongo-node"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        wanted = "".join((SOURCE / name).read_text() for name in PINNED)
        stamp = folder / ".installed"
        if not (stamp.exists() and stamp.read_text() == wanted and (folder / "node_modules/paymongo-node").is_dir()):
            for name in PINNED:
                shutil.copyfile(SOURCE / name, folder / name)
            done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=folder,
                                  capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, f"npm ci of paymongo-node into {folder} failed:\n{done.stderr}"
            stamp.write_text(wanted)
    return folder


def node_sdk_run(request: dict) -> dict:
    """check.js with `request` on its stdin, under the installed SDK; its JSON answer. AssertionError with node's
    stderr when it fails."""
    folder = node_sdk_folder()
    done = subprocess.run(["node", str(SOURCE / "check.js")], input=json.dumps(request), capture_output=True,
                          text=True, timeout=60, env={**os.environ, "NODE_PATH": str(folder / "node_modules")})
    assert done.returncode == 0, f"paymongo-node check failed:\n{done.stderr}"
    return json.loads(done.stdout)


def assert_sdk_constructs_every_webhook(emulator) -> int:
    """webhooks.constructEvent of paymongo-node on every webhook the emulator signed (emulator.webhooks_sent), each
    taken with its type and resource, and refused once a byte of its body changes. Returns how many were checked."""
    sent = list(emulator.webhooks_sent)
    if not sent:
        return 0
    out = node_sdk_run({"url": emulator.url, "secret_key": emulator.secret_key,
                        "webhook_secret": emulator.webhook_secret,
                        "webhooks": [{"payload": body.decode(), "header": header} for body, header in sent]})
    for (body, _), event in zip(sent, out["webhooks"], strict=True):
        expected = json.loads(body)["data"]
        assert (event["id"], event["type"], event["resource_id"]) == (
            expected["id"], expected["attributes"]["type"], expected["attributes"]["data"].get("id")), event
        assert event["tampered"] == "SignatureVerificationError", event
    return len(sent)

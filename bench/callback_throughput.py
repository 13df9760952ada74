"""Callback delivery throughput of ONE Celery worker process to a local receiver (part of make bench).

The events are enqueued through the real outbox (callback_enqueue, dispatch after commit) while no worker
runs; then one worker process starts and the figure is the receiver's arrival rate from the first to the
last delivery (so worker start-up is not counted). Bounded by `events` and `timeout`.
"""

import subprocess
import sys
import time
from pathlib import Path

from django.db import transaction

ROOT = Path(__file__).resolve().parent.parent
MERCHANTS = 20


def _enqueue(events: int, url: str) -> None:
    from apps.callbacks.models import CallbackEvent
    from apps.callbacks.enqueue import callback_enqueue
    from apps.common import signing
    from apps.merchants.services import merchant_create

    key = signing.generate_private_key()
    # A worker serves many merchants; each merchant is also capped by the bulkhead (4 in flight).
    merchants = [merchant_create(name=f"Bench callbacks {n}", public_key_pem=signing.public_key_to_pem(key.public_key()),
                                 currencies=["PHP"], collection_callback_url=url).merchant for n in range(MERCHANTS)]
    stamp = int(time.time())
    batch = 200
    for start in range(0, events, batch):
        with transaction.atomic():
            for i in range(start, min(events, start + batch)):
                order_no = f"CB{stamp}{i:07d}"
                callback_enqueue(merchant=merchants[i % MERCHANTS], type=CallbackEvent.Type.COLLECTION_SUCCESS,
                                 platform_order_no=order_no,
                                 payload={"platform_order_no": order_no, "mch_order_no": f"m{i}", "amount": 10000,
                                          "currency": "PHP", "status": "SUCCESS", "paid_at": stamp, "attach": ""})


def measure(*, env: dict, events: int, timeout: float, concurrency: int = 16) -> dict:
    sys.path.insert(0, str(ROOT))
    from tests.support.receiver import CallbackReceiver

    receiver = CallbackReceiver().start()
    worker = None
    try:
        _enqueue(events, receiver.url)
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "threads", "--concurrency",
             str(concurrency), "--loglevel", "WARNING", "--without-heartbeat", "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            receiver.wait_for(events, timeout=timeout)
        except AssertionError:
            pass
        arrivals = [r.at for r in receiver.requests]
    finally:
        if worker:
            worker.terminate()
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
        receiver.stop()
    delivered = len(arrivals)
    span = (max(arrivals) - min(arrivals)) if delivered > 1 else 0.0
    return {"events": events, "delivered": delivered, "seconds": span,
            "events_per_s": (delivered - 1) / span if span else 0.0, "concurrency": concurrency,
            "merchants": MERCHANTS}

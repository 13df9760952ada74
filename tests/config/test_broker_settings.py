"""The broker's settings follow its URL (docs/architecture.md, "The broker"): RabbitMQ gets quorum queues on a topic
exchange and publisher confirms, and never the Redis transport; Redis gets config/broker.py."""

import json
import os
import subprocess
import sys

from django.conf import settings

SHOW = ("from config.celery import app; import json; c = app.conf; print(json.dumps({'queue_type': "
        "c.task_default_queue_type, 'exchange_type': c.task_default_exchange_type, 'transport': c.broker_transport, "
        "'options': c.broker_transport_options, 'detect_quorum': c.worker_detect_quorum_queues}))")


def conf_with(broker_url: str) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "CELERY_BROKER_URL": broker_url}
    done = subprocess.run([sys.executable, "-c", f"import django; django.setup(); {SHOW}"], cwd=settings.BASE_DIR,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_rabbitmq_broker_gets_quorum_queues_a_topic_exchange_and_publisher_confirms():
    conf = conf_with("amqp://guest:guest@127.0.0.1:5672/payments")
    assert conf == {"queue_type": "quorum", "exchange_type": "topic", "transport": None,
                    "options": {"confirm_publish": True}, "detect_quorum": True}


def test_a_redis_broker_keeps_the_platforms_redis_transport_and_its_visibility_timeout():
    conf = conf_with("redis://127.0.0.1:6379/7")
    assert conf["transport"] == "config.broker:Transport"
    assert conf["queue_type"] == "classic" and conf["options"]["visibility_timeout"] == 3600

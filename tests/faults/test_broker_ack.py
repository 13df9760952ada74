"""A Redis that stalls while a worker acknowledges must not stop the worker from consuming (config/broker.py).

Seen in the soak: two "Couldn't ack … TimeoutError" lines during Redis stalls, and the worker (concurrency 2,
prefetch 2) never took another task: APPROVED payouts stayed unsubmitted until the worker was restarted.
Real redis-server (private, SIGSTOPped), real kombu channels, the platform's transport against kombu's own.
"""

import pytest
from kombu import Connection, Exchange, Queue

from config.broker import Transport

TIMEOUTS = {"socket_timeout": 0.5, "socket_connect_timeout": 0.5}


def _channel_after_a_stalled_ack(private_redis, transport):
    """Deliver one message to a prefetch-1 consumer, freeze Redis, acknowledge it (fails), thaw; the channel."""
    queue = Queue("ack-drill", Exchange("ack-drill"), routing_key="ack-drill")
    connection = Connection(private_redis.url, transport=transport, transport_options=TIMEOUTS)
    channel = connection.channel()
    producer = connection.Producer(channel)
    producer.publish({"n": 1}, exchange=queue.exchange, routing_key="ack-drill", declare=[queue])
    channel.basic_qos(prefetch_size=0, prefetch_count=1)
    message = queue(channel).get(no_ack=False)
    assert message is not None and message.payload == {"n": 1}
    assert not channel.qos.can_consume(), "one message delivered with prefetch 1: the channel is full"
    private_redis.freeze()
    try:
        with pytest.raises(Exception):
            message.ack()  # Redis does not answer: what Celery logs as "Couldn't ack" and then ignores
    finally:
        private_redis.thaw()
    return connection, channel


def test_an_acknowledgement_redis_never_answered_does_not_stop_the_worker_consuming(private_redis):
    connection, channel = _channel_after_a_stalled_ack(private_redis, Transport)
    try:
        assert channel.qos.can_consume(), "the failed ack left the delivery counted: this consumer would take no task"
    finally:
        connection.release()


def test_kombus_own_redis_transport_wedges_there_which_is_why_the_platform_replaces_it(private_redis):
    """The reason for config/broker.py: if a kombu release fixes this, this test fails and the override can go."""
    connection, channel = _channel_after_a_stalled_ack(private_redis, "redis")
    try:
        assert not channel.qos.can_consume()
    finally:
        connection.release()


def test_the_platform_uses_that_transport_for_a_redis_broker(settings):
    from config.celery import app

    assert settings.CELERY_BROKER_TRANSPORT == "config.broker:Transport"
    with app.connection_for_write() as connection:
        assert connection.transport_cls == "config.broker:Transport" or isinstance(connection.transport, Transport)

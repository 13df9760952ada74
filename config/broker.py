"""The Redis broker transport, with one fix to kombu's acknowledgement (docs/faults.md, "Why the broker's QoS
is ours"). Used when the broker is Redis (development, `make run`, the suite); production's broker, RabbitMQ,
keeps deliveries on the server and does not load it (docs/architecture.md, "The broker").

kombu's Redis QoS forgets a delivered message only after Redis has answered the acknowledgement
(`kombu.transport.redis.QoS.ack`: remove from the unacked index, then `virtual.QoS.ack`). When Redis does not answer
in time (stalled, swapping, a network blip), the first step raises, Celery logs "Couldn't ack" and goes on, and the
message stays "delivered" in the worker's memory for good. The worker takes a new message only while fewer than
prefetch_count are delivered, so after prefetch_count such failures (2 with concurrency 2) it never consumes again:
no payout is submitted, no callback delivered, until someone restarts it. Seen in the soak.

Here the worker forgets the delivery whatever Redis answered. A message whose acknowledgement did not reach Redis
stays in Redis' unacked index and is delivered again after the visibility timeout; every task is idempotent (and
the sweepers finish orders long before that), so the worst case is a task that runs twice and does nothing the
second time.
"""

from contextlib import contextmanager

from kombu.transport import redis, virtual


class QoS(redis.QoS):
    def ack(self, delivery_tag):
        try:
            self._remove_from_indices(delivery_tag).execute()
        finally:
            virtual.QoS.ack(self, delivery_tag)

    def reject(self, delivery_tag, requeue=False):
        try:
            if requeue:
                self.restore_by_tag(delivery_tag, leftmost=True)
            else:
                self._remove_from_indices(delivery_tag).execute()
        finally:
            virtual.QoS.ack(self, delivery_tag)


class Channel(redis.Channel):
    QoS = QoS

    @contextmanager
    def conn_or_acquire(self, client=None):
        """kombu builds a new redis.Redis client (copying its ~200 response callbacks) for every publish; on the
        same connection pool one client per channel does the same, for a fifth of the publish's CPU
        (docs/performance.md, "The Celery publish"). redis-py clients are thread-safe: each command takes a
        connection from the pool."""
        if client:
            yield client
        else:
            if self._publish_client is None:
                self._publish_client = self._create_client()
            yield self._publish_client

    _publish_client = None


class Transport(redis.Transport):
    Channel = Channel

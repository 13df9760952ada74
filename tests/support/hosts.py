"""Several hosts on one machine, as tests/hosts and the soak's several-hosts deployment run them (docs/deployment.md,
"Several hosts with Docker Compose"): each host its own gunicorn, Celery worker and beat on its own loopback address
(127.0.0.2, 127.0.0.3, ...), HAProxy in front of them, PgBouncer in transaction pooling between every host and the
database, one Redis (or a RabbitMQ vhost) as the broker they share. Processes are started through
tests/faults/processes.py's `Processes`, which ends every one of them."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from django.db import connection

from tests.faults.processes import Platform, PrivateRedis, Proc, Processes
from tests.pgbouncer.server import PgBouncer
from tests.support.haproxy import HAProxy
from tests.support.wait import wait_until


class Host:
    """One host: gunicorn, a Celery worker and a beat on one loopback address; killed whole and started again."""

    def __init__(self, platform: Platform, name: str, *, web_database_url: str, web_workers: int = 2,
                 worker_concurrency: int = 8, worker_pool: str = "threads"):
        self.platform, self.name = platform, name
        self.web_database_url = web_database_url
        self.web_workers, self.worker_concurrency, self.worker_pool = web_workers, worker_concurrency, worker_pool
        self.beats: list[Proc] = []  # one per start

    def start(self) -> "Host":
        """The worker boots while gunicorn does (on two cores, a host's start-up is mostly Django's)."""
        worker = self.platform.start_worker(concurrency=self.worker_concurrency, pool=self.worker_pool, wait=False)
        self.platform.start_web(workers=self.web_workers, extra_env={"DATABASE_URL": self.web_database_url})
        self.beats.append(self.platform.start_beat())
        worker.wait_for_log(" ready.", timeout=self.platform.ready_timeout)
        return self

    def processes(self) -> list[Proc]:
        """What runs on the host now: its gunicorn, its Celery worker (a replaced one too) and its beat."""
        return [p for p in (self.platform.web, *self.platform.workers, *self.beats) if p is not None and p.alive()]

    def kill(self) -> None:
        """SIGKILL to every process group of the host at once: a machine that lost its power."""
        processes = self.processes()
        for process in processes:
            process.kill()
        for process in processes:
            process.popen.wait(timeout=10)


def bouncer_start(procs: Processes, workdir: Path, *, pool_size: int = 8) -> PgBouncer:
    """PgBouncer in front of the database Django is connected to (the test's, or the soak's), started and ready."""
    s = connection.settings_dict
    bouncer = PgBouncer(workdir, database=s["NAME"], user=s["USER"], server_host=s["HOST"] or "127.0.0.1",
                        server_port=int(s["PORT"] or 5432), pool_size=pool_size)
    bouncer.wait_ready(procs.start("pgbouncer", bouncer.argv()).popen)
    return bouncer


def hosts_start(procs: Processes, redis: PrivateRedis, bouncer: PgBouncer, *, count: int = 2, web_workers: int = 2,
                worker_concurrency: int = 8, worker_pool: str = "threads",
                **settings_env) -> tuple[list[Host], HAProxy]:
    """`count` hosts booted side by side (as machines do) behind a started HAProxy; returns once the proxy sends to
    every host. Workers and beats reach the database through `bouncer` (application_name hosts-worker), gunicorn too
    (hosts-web); every link the platform writes (pay_url) goes through the proxy. `settings_env`: more settings of
    every process, e.g. BEAT_LOCK_SECONDS, or broker_url (Platform's)."""
    addresses = [f"127.0.0.{2 + i}" for i in range(count)]
    shared = {"DATABASE_URL": bouncer.url(application_name="hosts-worker"), "DATABASE_POOLER": "pgbouncer-transaction",
              "CONN_MAX_AGE": 60, "BEHIND_PROXY": "true", "ALLOWED_HOSTS": ",".join(["127.0.0.1", *addresses]),
              **settings_env}
    # ready_timeout: a host boots three Django processes at once on two cores, beside whatever else the machine runs.
    platforms = [Platform(procs, redis, host=address, ready_timeout=120, **shared) for address in addresses]
    proxy = HAProxy(procs.tmp_path, [(p.host, p.port) for p in platforms])
    for platform in platforms:
        platform.env["API_ROOT"] = proxy.base
    hosts = [Host(platform, f"host{i}", web_database_url=bouncer.url(application_name="hosts-web"),
                  web_workers=web_workers, worker_concurrency=worker_concurrency, worker_pool=worker_pool)
             for i, platform in enumerate(platforms)]
    with ThreadPoolExecutor(max_workers=count) as pool:
        list(pool.map(Host.start, hosts))
    procs.start("haproxy", proxy.argv())
    wait_until(proxy.all_up, timeout=30, interval=0.2, what="the proxy sending to every host")
    return hosts, proxy

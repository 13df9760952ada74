"""The deployment files a cluster and Docker Compose accept (docs/deployment.md): every Kubernetes manifest of
deploy/k8s against the Kubernetes schemas (kubernetes-validate's bundled schemas, strict: offline, an unknown field
fails), the kustomization's references, and the environment each platform container gets: every name one the
settings read, every name production settings require present, and the values accepted by production settings."""

import ast
import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml
from django.conf import settings

ROOT = Path(settings.BASE_DIR)
K8S = ROOT / "deploy/k8s"
KUBERNETES_VERSION = "1.30"  # the oldest minor version the manifests are for (docs/deployment.md, "The cluster")
IMAGE = "payments"  # the platform's image in the manifests; kustomization.yaml's `images` names the real one


def _documents(path: Path) -> list[dict]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def _kustomization() -> dict:
    return yaml.safe_load((K8S / "kustomization.yaml").read_text())


def _applied() -> list[dict]:
    """What `kubectl apply -k deploy/k8s` applies, before kustomize's namespace, labels and image."""
    return [document for name in _kustomization()["resources"] for document in _documents(K8S / name)]


def _secrets() -> list[dict]:
    return _documents(K8S / "secrets.template.yaml")


def _every_manifest() -> list[tuple[str, dict]]:
    return [(f"{path.name}: {doc['kind']}/{doc['metadata']['name']}", doc)
            for path in sorted(K8S.glob("*.yaml")) if path.name != "kustomization.yaml" for doc in _documents(path)]


# --- what the settings read ------------------------------------------------------------------------------------

def _names_read(path: Path) -> tuple[set[str], set[str]]:
    """Environment names a module reads, and those it reads without a default: env("X"), env.int("X", default=...),
    os.environ.get("X"), os.environ["X"], os.environ.setdefault("X", ...)."""
    read, required = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = ast.unparse(node.func)
            if func == "env" or (func.startswith("env.") and func.count(".") == 1):
                read.add(node.args[0].value)
                if not any(k.arg == "default" for k in node.keywords) and len(node.args) == 1:
                    required.add(node.args[0].value)
            elif func in ("os.environ.get", "os.environ.setdefault", "os.getenv"):
                read.add(node.args[0].value)
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ" \
                and isinstance(node.slice, ast.Constant):
            read.add(node.slice.value)
    return read, required


def settings_read() -> set[str]:
    names = set()
    for path in [*ROOT.glob("config/*.py"), *ROOT.glob("config/settings/*.py")]:
        names |= _names_read(path)[0]
    return names


def production_requires() -> set[str]:
    """What config.settings.production refuses to start without: its _REQUIRED, and what base reads without a
    default."""
    tree = ast.parse((ROOT / "config/settings/production.py").read_text())
    listed = next(ast.literal_eval(node.value) for node in ast.walk(tree) if isinstance(node, ast.Assign)
                  and any(getattr(target, "id", "") == "_REQUIRED" for target in node.targets))
    return set(listed) | _names_read(ROOT / "config/settings/base.py")[1] \
        | _names_read(ROOT / "config/settings/production.py")[1]


def test_the_settings_scan_sees_what_production_requires_and_optional_names():
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "PLATFORM_KEY_ENCRYPTION_KEY", "ALLOWED_HOSTS"} \
        <= production_requires()
    assert {"CELERY_BROKER_URL", "DATABASE_POOLER", "BEAT_LOCK_SECONDS", "PROMETHEUS_MULTIPROC_DIR",
            "DJANGO_SETTINGS_MODULE"} <= settings_read()
    assert "CELERY_BROKER_URL" in production_requires()  # RabbitMQ in production, named explicitly
    assert "DATABASE_REPLICA_URL" in settings_read()


# --- Kubernetes ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("where", "manifest"), _every_manifest(), ids=[w for w, _ in _every_manifest()])
def test_every_manifest_is_valid_against_the_kubernetes_schemas(where, manifest):
    kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)


def test_the_validation_refuses_a_misspelt_field_and_a_wrong_type():
    web = next(doc for doc in _applied() if doc["kind"] == "Deployment" and doc["metadata"]["name"] == "web")
    misspelt = copy.deepcopy(web)
    misspelt["spec"]["replica"] = misspelt["spec"].pop("replicas")
    wrong_type = copy.deepcopy(web)
    wrong_type["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["periodSeconds"] = "5s"
    for broken in (misspelt, wrong_type):
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_the_kustomization_lists_every_manifest_but_the_secrets_template_and_names_the_image():
    kustomization = _kustomization()
    listed = set(kustomization["resources"])
    assert all((K8S / name).is_file() for name in listed)
    on_disk = {path.name for path in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert on_disk - listed == {"secrets.template.yaml"}  # real secrets are never applied from the repository
    assert [image["name"] for image in kustomization["images"]] == [IMAGE]
    assert kustomization["namespace"] == "payments"
    assert all(doc["metadata"]["namespace"] == "payments" for doc in _secrets())


def _pod_specs() -> dict[str, dict]:
    """component -> pod spec, for every workload applied."""
    return {doc["metadata"]["name"]: doc["spec"]["template"]["spec"] for doc in _applied()
            if doc["kind"] in ("Deployment", "Job")}


def _platform_containers() -> dict[str, dict]:
    return {f"{name}/{c['name']}": c for name, spec in _pod_specs().items() for c in spec["containers"]
            if c["image"] == IMAGE}


def _environment(container: dict) -> dict[str, str]:
    """The environment a platform container starts with: its envFrom ConfigMaps and Secrets (the secrets' template),
    then its env (which wins), as the kubelet builds it."""
    sources = {(doc["kind"], doc["metadata"]["name"]): doc.get("data") or doc.get("stringData") or {}
               for doc in [*_applied(), *_secrets()] if doc["kind"] in ("ConfigMap", "Secret")}
    environment: dict[str, str] = {}
    for source in container.get("envFrom", []):
        kind, ref = ("ConfigMap", source["configMapRef"]) if "configMapRef" in source else ("Secret",
                                                                                               source["secretRef"])
        assert (kind, ref["name"]) in sources, f"{kind} {ref['name']} is defined nowhere"
        environment.update(sources[kind, ref["name"]])
    for variable in container.get("env", []):
        if "value" in variable:
            environment[variable["name"]] = variable["value"]
        else:
            ref = variable["valueFrom"]["secretKeyRef"]
            assert ("Secret", ref["name"]) in sources, f"Secret {ref['name']} is defined nowhere"
            environment[variable["name"]] = sources["Secret", ref["name"]][ref["key"]]
    return environment


def test_each_platform_container_sets_only_names_the_settings_read_and_every_required_one():
    read, required = settings_read(), production_requires()
    containers = _platform_containers()
    assert set(containers) == {"web/web", "worker/worker", "beat/beat", "payments-migrate/migrate"}
    for where, container in containers.items():
        environment = _environment(container)
        assert set(environment) - read == set(), where
        assert required - set(environment) == set(), where
        assert environment["DJANGO_SETTINGS_MODULE"] == "config.settings.production", where
        assert urlsplit(environment["CELERY_BROKER_URL"]).scheme == "amqp", where
        assert urlsplit(environment["DATABASE_REPLICA_URL"]).path == "/payments_replica", where


def test_web_worker_and_beat_reach_postgresql_through_pgbouncer_and_the_migration_directly():
    pgbouncer = next(doc for doc in _applied() if doc["kind"] == "Service" and doc["metadata"]["name"] == "pgbouncer")
    port = pgbouncer["spec"]["ports"][0]["port"]
    for where, container in _platform_containers().items():
        environment = _environment(container)
        database = urlsplit(environment["DATABASE_URL"])
        if where.startswith("payments-migrate"):
            assert database.hostname != "pgbouncer" and environment["DATABASE_POOLER"] == ""
        else:
            assert (database.hostname, database.port) == ("pgbouncer", port), where
            assert environment["DATABASE_POOLER"] == "pgbouncer-transaction", where
    ini = next(doc for doc in _applied() if doc["kind"] == "ConfigMap" and doc["metadata"]["name"]
               == "pgbouncer-config")["data"]["pgbouncer.ini"]
    assert "pool_mode = transaction" in ini and "payments_replica =" in ini


def test_the_production_settings_start_with_what_the_manifests_set():
    """Each container's environment (the template's CHANGE-ME values standing in for the secrets) given to a fresh
    Python that loads config.settings.production: nothing refused, and the values mean what the manifests say."""
    probe = ("import json; from django.conf import settings as s; print(json.dumps({'pooler': s.DATABASE_POOLER, "
             "'cursors': s.DATABASES['default']['DISABLE_SERVER_SIDE_CURSORS'], 'hosts': s.ALLOWED_HOSTS, "
             "'proxy': s.BEHIND_PROXY, 'broker': s.CELERY_BROKER_URL.split(':')[0], 'debug': s.DEBUG}))")
    keep = {"PATH", "HOME", "LANG", "VIRTUAL_ENV"}
    for where, container in _platform_containers().items():
        environment = _environment(container)
        environment["PLATFORM_KEY_ENCRYPTION_KEY"] = "x" * 43 + "="  # the template's CHANGE-ME is not a Fernet key
        run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                             env={**{k: v for k, v in os.environ.items() if k in keep}, **environment})
        assert run.returncode == 0, f"{where}: {run.stderr[-2000:]}"
        loaded = json.loads(run.stdout.splitlines()[-1])
        assert loaded["broker"] == "amqp" and loaded["proxy"] is True and loaded["debug"] is False, where
        assert "localhost" in loaded["hosts"], where  # the probes' Host
        assert loaded["cursors"] == (loaded["pooler"] == "pgbouncer-transaction"), where


def test_web_is_autoscaled_and_ready_on_healthz_beat_is_one_and_migrations_are_a_job():
    by_kind_name = {(doc["kind"], doc["metadata"]["name"]): doc for doc in _applied()}
    web = by_kind_name["Deployment", "web"]
    container = web["spec"]["template"]["spec"]["containers"][0]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["port"] in ports
    hpa = by_kind_name["HorizontalPodAutoscaler", "web"]
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
    assert container["resources"]["requests"]["cpu"]  # the HPA's utilisation is of the request

    beat = by_kind_name["Deployment", "beat"]
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"] == {"type": "Recreate"}
    assert "beat" in beat["spec"]["template"]["spec"]["containers"][0]["command"]

    job = by_kind_name["Job", "payments-migrate"]
    assert "manage.py migrate --noinput" in " ".join(job["spec"]["template"]["spec"]["containers"][0]["command"])
    assert job["metadata"]["annotations"]["argocd.argoproj.io/hook"] == "PreSync"
    # `kubectl apply -k deploy/k8s -l rollout-phase=migrate` applies what the Job needs, and nothing that serves.
    first = {(doc["kind"], doc["metadata"]["name"]) for doc in _applied()
             if doc["metadata"].get("labels", {}).get("rollout-phase") == "migrate"}
    assert first == {("Namespace", "payments"), ("ConfigMap", "payments-config"), ("Job", "payments-migrate")}


def test_every_service_and_budget_selects_pods_that_exist():
    templates = [doc["spec"]["template"]["metadata"]["labels"] for doc in _applied() if doc["kind"] == "Deployment"]
    for doc in _applied():
        if doc["kind"] == "Service":
            selector = doc["spec"]["selector"]
        elif doc["kind"] == "PodDisruptionBudget":
            selector = doc["spec"]["selector"]["matchLabels"]
        else:
            continue
        assert any(selector.items() <= labels.items() for labels in templates), doc["metadata"]["name"]
    for doc in _applied():
        if doc["kind"] == "Deployment":
            assert doc["spec"]["selector"]["matchLabels"].items() <= doc["spec"]["template"]["metadata"][
                "labels"].items()


# --- Docker Compose -----------------------------------------------------------------------------------------------

def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_platform_services_set_only_names_the_settings_read_and_every_required_one():
    read, required = settings_read(), production_requires()
    services = _compose()["services"]
    platform = {name: service for name, service in services.items() if service.get("build") == "."}
    assert set(platform) == {"migrate", "web", "worker", "beat"}
    for name, service in platform.items():
        environment = service["environment"]
        assert set(environment) - read == set(), name
        assert required - set(environment) == set(), name
        database = urlsplit(environment["DATABASE_URL"])
        if name == "migrate":
            assert database.hostname == "postgres" and environment["DATABASE_POOLER"] == ""
        else:
            assert database.hostname == "pgbouncer" and environment["DATABASE_POOLER"] == "pgbouncer-transaction"
            assert urlsplit(environment["DATABASE_REPLICA_URL"]).hostname == "pgbouncer"
            assert service["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}


def test_compose_has_pgbouncer_a_streaming_replica_and_a_proxy_and_its_comment_says_how_to_scale():
    text = (ROOT / "docker-compose.yml").read_text()
    services = _compose()["services"]
    assert "docker compose up --build --scale web=3 --scale worker=2" in text
    assert "ports" not in services["web"]  # scaled: only the proxy publishes a port
    assert services["proxy"]["ports"] == ["8000:8000"]
    assert services["postgres-replica"]["depends_on"]["postgres"] == {"condition": "service_healthy"}
    start = (ROOT / "deploy/compose/replica-start.sh").read_text()
    assert "pg_basebackup -h postgres -U replicator" in start and " -R " in start  # a standby of the primary
    ini = (ROOT / "deploy/compose/pgbouncer.ini").read_text()
    assert "payments = host=postgres " in ini and "payments_replica = host=postgres-replica " in ini
    assert "pool_mode = transaction" in ini
    for path in ("deploy/compose/pgbouncer.ini", "deploy/compose/haproxy.cfg", "deploy/compose/userlist.txt",
                 "deploy/compose/primary-init.sh", "deploy/compose/replica-start.sh"):
        assert any(path in str(volume) for service in services.values() for volume in service.get("volumes", [])), \
            path


def test_compose_haproxy_configuration_is_accepted_by_haproxy():
    from tests.support.haproxy import HAPROXY

    run = subprocess.run([HAPROXY, "-c", "-f", str(ROOT / "deploy/compose/haproxy.cfg")], capture_output=True,
                         text=True, timeout=30)
    assert run.returncode == 0, run.stdout + run.stderr

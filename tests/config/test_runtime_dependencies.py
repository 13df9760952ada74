"""The image installs only what running needs (`uv sync --frozen --no-dev`, Dockerfile), so nothing the web, worker
and beat processes import may come from the dev group. `make run` and `make test` install the same .venv, dev group
included, so neither removes what the other (or a plain `uv run` in a second terminal) installs."""

import ast
import re
import subprocess
import tomllib
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)
# Dev group distribution -> the module names it provides (py-spy is a program, no module).
DEV_MODULES = {"pytest": {"pytest", "_pytest"}, "pytest-django": {"pytest_django"},
               "pytest-xdist": {"xdist"}, "time-machine": {"time_machine"},
               "playwright": {"playwright"}, "hypothesis": {"hypothesis"}, "beautifulsoup4": {"bs4"},
               "schemathesis": {"schemathesis"}, "py-spy": set(), "mypy": {"mypy"}, "types-requests": set(),
               "kubernetes-validate": {"kubernetes_validate"},  # deploy/k8s against the Kubernetes schemas, offline
               "xendit-python": {"xendit"},  # judges the Xendit emulator in tests/channels; the adapter uses requests
               "payments-merchant": {"payments_merchant"}}  # the SDK, for tests/sdk: merchants install it, the platform never imports it


def dev_group() -> set[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0] for requirement in pyproject["dependency-groups"]["dev"]}


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_every_dev_dependency_has_its_module_names_listed_here():
    assert dev_group() == set(DEV_MODULES)


def test_running_code_imports_no_dev_dependency():
    dev_modules = set().union(*DEV_MODULES.values())
    offenders = {str(path.relative_to(ROOT)): sorted(imported_modules(path) & dev_modules)
                 for folder in ("apps", "config") for path in (ROOT / folder).rglob("*.py")}
    assert {path: names for path, names in offenders.items() if names} == {}
    assert imported_modules(ROOT / "manage.py") & dev_modules == set()


def make_dry_run(target: str) -> str:
    # -n prints the commands and runs none (`run` and `serve` would start the platform).
    return subprocess.run(["make", "-n", "--no-print-directory", target], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout


def test_make_run_serve_and_test_install_the_same_environment_and_remove_nothing():
    for target in ("run", "serve", "migrate", "test"):
        commands = make_dry_run(target).splitlines()
        assert "uv sync --frozen" in commands, (target, commands)
        assert not any("--no-dev" in command for command in commands), (target, commands)
    # `uv run` under UV_NO_DEV would take the dev group out of .venv again, at every start.
    assert "UV_NO_DEV" not in (ROOT / "Makefile").read_text() and "--no-dev" not in (ROOT / "Procfile").read_text()


def docker_context_excludes(path: str) -> bool:
    """Whether .dockerignore keeps `path` (relative to the repository) out of the image's build context: Docker's
    rule, a pattern (Go filepath.Match, `*` within one path segment, `**` any number of them) matching the path or
    one of its parent directories; a `!` line lets a path back in."""
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    parts = path.split("/")
    candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    excluded = False
    for pattern in patterns:
        negate, pattern = pattern.startswith("!"), pattern.lstrip("!").strip("/")
        regex = re.escape(pattern).replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*")
        regex = regex.replace(r"\?", "[^/]")
        if any(re.fullmatch(regex, candidate) for candidate in candidates):
            excluded = not negate
    return excluded


def test_the_image_gets_no_local_virtualenv_state_or_secrets_of_the_checkout():
    # `COPY . .` comes after `uv sync --frozen --no-dev`: a copied .venv would replace the image's own with a
    # developer's, test tools included.
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "uv sync --frozen --no-dev" in dockerfile and "COPY . ." in dockerfile
    for path in (".venv/bin/pytest", ".venv/lib/python3.11/site-packages/playwright/__init__.py",
                 "var/postgres/PG_VERSION", "var/valkey/appendonlydir/x.aof", ".env", ".git/HEAD", "merchant.pem",
                 "platform_keys.json", "apps/callbacks/__pycache__/deliver.cpython-311.pyc"):
        assert docker_context_excludes(path), path
    for path in ("manage.py", "pyproject.toml", "uv.lock", "apps/callbacks/deliver.py", "config/settings/production.py",
                 "templates/home.html", "static", "Procfile"):
        assert not docker_context_excludes(path), path

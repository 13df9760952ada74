"""The import graph between apps (docs/STYLE: "Dependencies point down"). Every apps/**/*.py except migrations is
parsed with `ast`, imports inside functions included, so a lazy import cannot hide an upward one.

ALLOWED is what each app imports today. `apps.common` imports no other app. A new edge fails the test with the file
and line: either point it down (move the code, register a hook as apps/common/staff_requests.py does) or add the
edge here with its reason, in review. An edge no longer used fails too, so the map stays true.
"""

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ROOT / "apps"

DOWN = "down"  # apps.common, or a domain importing ledger or channels (STYLE.md)
REFERENCE = "down: reference data (currencies, merchants and their products), read by every domain"

ALLOWED: dict[str, dict[str, str]] = {
    "common": {},  # knows no other app: domains register what it needs (staff request kinds)
    "currencies": {"common": DOWN},
    "merchants": {
        "common": DOWN,
        "currencies": REFERENCE,
        "ledger": "creating a merchant opens its ledger accounts (services.py)",
        "channels": "the bootstrap command seeds the sandbox channels and bank codes",
    },
    "ledger": {
        "common": DOWN,
        "currencies": REFERENCE,
        "merchants": REFERENCE + "; accounts belong to a merchant, statements are signed with the platform key",
    },
    "channels": {
        "common": DOWN,
        "currencies": REFERENCE,
        "merchants": REFERENCE + "; routing reads the merchant's enabled currencies and products",
    },
    "callbacks": {
        "common": DOWN,
        "merchants": REFERENCE + "; an event goes to its merchant's callback URL, signed with the platform key",
    },
    "collection": {
        "common": DOWN,
        "ledger": DOWN,
        "channels": DOWN,
        "currencies": REFERENCE,
        "merchants": REFERENCE + "; the signed API's base view",
        "callbacks": "an order's terminal state enqueues its callback in the same transaction (the outbox)",
    },
    "payout": {
        "common": DOWN,
        "ledger": DOWN,
        "channels": DOWN,
        "currencies": REFERENCE,
        "merchants": REFERENCE + "; the signed API's base view, the four-eyes administrator check",
        "callbacks": "a payout's terminal state enqueues its callback in the same transaction (the outbox)",
    },
    "operations": {  # above the domains; no app imports it
        "common": DOWN,
        "currencies": REFERENCE,
        "callbacks": "above the domains: the operations overview reads callbacks due and dead",
        "collection": "above the domains: the operations overview reads today's pay-ins and pending settlement",
        "payout": "above the domains: the operations overview reads today's payouts and the review queue",
    },
    "payout_batches": {  # a merchant's own payouts by hand (docs/portal.md); above payout, below the portal
        "common": DOWN + "; the second factor asked again (step_up), the retry policy",
        "channels": DOWN + "; a row is checked as payout/create checks it: the route and the bank code",
        "merchants": REFERENCE + "; a batch belongs to a merchant and its people",
        "payout": "each row goes through payout_create exactly as an API call (its serializer's field rules)",
    },
    "portal": {  # the merchant's own back office (docs/portal.md); at the top, as operations: no app imports it
        "common": DOWN + "; the staff sign-in's second factor, audit",
        "currencies": REFERENCE,
        "merchants": REFERENCE + "; merchant users, keys and callback URLs",
        "ledger": "the home page's balances and the statements",
        "callbacks": "an order's callbacks with every attempt, the re-send, the test callback",
        "collection": "the merchant's pay-ins",
        "payout": "the merchant's payouts",
        "payout_batches": "payouts by hand: the pages of the batches",
    },
}


def _imported_modules(node: ast.AST) -> list[str]:
    """Dotted module names a node imports: import statements anywhere in the file, and
    importlib.import_module / import_string calls with a literal name."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        if node.module == "apps":  # from apps import payout
            return [f"apps.{alias.name}" for alias in node.names]
        return [node.module]
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name in ("import_module", "import_string") and isinstance(node.args[0].value, str):
            return [node.args[0].value]
    return []


def _python_files() -> list[Path]:
    return sorted(path for path in APPS.rglob("*.py") if "migrations" not in path.relative_to(APPS).parts)


def import_edges() -> dict[tuple[str, str], list[str]]:
    """(importing app, imported app) -> ["apps/x/y.py:12 apps.z.w", ...]"""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in _python_files():
        source_app = path.relative_to(APPS).parts[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            for module in _imported_modules(node):
                parts = module.split(".")
                if parts[0] == "apps" and len(parts) > 1 and parts[1] != source_app:
                    edges[(source_app, parts[1])].append(f"{path.relative_to(ROOT)}:{node.lineno} {module}")
    return edges


def test_every_app_has_an_entry_in_the_allowed_map():
    apps = {path.parent.name for path in APPS.glob("*/apps.py")}
    assert apps == set(ALLOWED), f"apps without an entry in ALLOWED (or entries without an app): {apps ^ set(ALLOWED)}"


def test_common_imports_no_other_app():
    found = [where for (source, _), wheres in import_edges().items() if source == "common" for where in wheres]
    assert not found, ("apps/common knows no other app (STYLE.md); let the domain register what common needs "
                       "instead (see apps/common/staff_requests.py):\n  " + "\n  ".join(found))


def test_no_import_between_apps_outside_the_allowed_map():
    new = [f"{where}  ({source} -> {target} is not in ALLOWED)"
           for (source, target), wheres in sorted(import_edges().items())
           if target not in ALLOWED.get(source, {}) for where in wheres]
    assert not new, ("new import between apps; point it down, or add the edge to ALLOWED in "
                     "tests/config/test_dependencies.py with its reason:\n  " + "\n  ".join(new))


def test_every_allowed_edge_is_still_used():
    edges = import_edges()
    stale = [f"{source} -> {target}" for source, targets in ALLOWED.items() for target in targets
             if (source, target) not in edges]
    assert not stale, f"no longer imported, remove from ALLOWED: {', '.join(stale)}"


def test_the_scan_sees_imports_inside_functions():
    tree = ast.parse("def f():\n    from apps.payout.models import Payout\n    import apps.ledger.services\n"
                     "    from apps import merchants\n    importlib.import_module('apps.collection.services')\n")
    found = [module for node in ast.walk(tree) for module in _imported_modules(node)]
    assert found == ["apps.payout.models", "apps.ledger.services", "apps.merchants", "apps.collection.services"]

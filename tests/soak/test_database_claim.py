"""The soak's database claim (tests/soak/harness.py: recreate_database): a second soak given the database of one
running now stops with a message naming SOAK_DATABASE, and the first one's database is left as it was."""

import os
import secrets
from types import SimpleNamespace
from urllib.parse import urlsplit

import psycopg
import pytest

from tests.soak import harness


@pytest.fixture
def server() -> str:
    url = urlsplit(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/payments"))
    return f"{url.scheme}://{url.netloc}"


def test_a_second_soak_on_a_database_in_use_stops_and_leaves_it_alone(server):
    opts = SimpleNamespace(postgres=server, database=f"soak_claim_{secrets.token_hex(4)}", template=None)
    claims = len(harness._CLAIMS)
    try:
        url = harness.recreate_database(opts)
        with psycopg.connect(url, autocommit=True) as first:
            first.execute("CREATE TABLE first_soaks_row (n int)")
        refused = f"database {opts.database} belongs to a soak running now.*SOAK_DATABASE"
        with pytest.raises(RuntimeError, match=refused):
            harness.recreate_database(opts)
        with psycopg.connect(url, autocommit=True) as first:  # not dropped: the first soak's table is there
            assert first.execute("SELECT to_regclass('first_soaks_row') IS NOT NULL").fetchone()[0]

        # Once the first soak has ended (its claim's session closed), the name can be used again.
        harness._CLAIMS.pop().close()
        harness.recreate_database(opts)
        with psycopg.connect(url, autocommit=True) as again:
            assert not again.execute("SELECT to_regclass('first_soaks_row') IS NOT NULL").fetchone()[0]
    finally:
        while len(harness._CLAIMS) > claims:
            harness._CLAIMS.pop().close()
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{opts.database}" WITH (FORCE)')

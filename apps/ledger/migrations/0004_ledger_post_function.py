"""The ledger's posting as one PostgreSQL function (docs/ledger.md, "How a posting is written").

`apps.ledger.services.post` checks its legs and calls `ledger_post` once: the function finds (or creates) the
accounts of the legs, locks the merchant accounts in primary-key order, refuses a merchant account going below zero
(returning the short account, having written nothing), then inserts the posting and its entries and moves the
merchant accounts' cached balances, in the caller's transaction; for a hold.place posting it also records the
hold (`hold_place`). It replaces four statements sent by the ORM (the
accounts locked, the posting, the entries, the balances) and the Python that built them. The deferred trigger, the
immutability triggers and the CHECK constraints of 0001 still refuse whatever bypasses it.
"""

from django.db import migrations

LEDGER_POST_SQL = """
CREATE OR REPLACE FUNCTION ledger_post(
    p_kind text, p_cause text, p_currency text, p_merchant_id bigint, p_memo text, p_created_at timestamptz,
    p_leg_merchants bigint[], p_leg_kinds text[], p_leg_amounts bigint[], p_hold_amount bigint,
    OUT posting_id bigint, OUT hold_id bigint,
    OUT short_account_id bigint, OUT short_merchant_id bigint, OUT short_kind text, OUT short_balance bigint,
    OUT short_needed bigint
) LANGUAGE plpgsql AS $$
DECLARE
    legs integer := cardinality(p_leg_amounts);
    leg_accounts bigint[];
    account record;
BEGIN
    -- Balanced legs of integer minor units, refused otherwise (post checks the same before calling).
    IF legs IS NULL OR legs < 2 OR cardinality(p_leg_kinds) IS DISTINCT FROM legs
       OR cardinality(p_leg_merchants) IS DISTINCT FROM legs THEN
        RAISE EXCEPTION 'ledger posting %:% needs at least two legs, each with an owner, a kind and an amount',
            p_kind, p_cause USING ERRCODE = 'check_violation';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_leg_amounts) AS l(amount) WHERE l.amount IS NULL OR l.amount = 0) THEN
        RAISE EXCEPTION 'ledger posting %:% has a leg of no amount', p_kind, p_cause
            USING ERRCODE = 'check_violation';
    END IF;
    IF (SELECT sum(l.amount) FROM unnest(p_leg_amounts) AS l(amount)) <> 0 THEN
        RAISE EXCEPTION 'ledger posting %:% does not balance: legs sum to %', p_kind, p_cause,
            (SELECT sum(l.amount) FROM unnest(p_leg_amounts) AS l(amount)) USING ERRCODE = 'check_violation';
    END IF;

    -- The account of each leg, in leg order; a missing one is created first (ON CONFLICT: by another transaction
    -- meanwhile), then all are read again. Platform accounts are only read: never locked nor updated.
    FOR attempt IN 1..2 LOOP
        SELECT array_agg(CASE WHEN l.merchant_id IS NULL
                    THEN (SELECT a.id FROM ledger_ledgeraccount a
                           WHERE a.merchant_id IS NULL AND a.currency_id = p_currency AND a.kind = l.kind)
                    ELSE (SELECT a.id FROM ledger_ledgeraccount a
                           WHERE a.merchant_id = l.merchant_id AND a.currency_id = p_currency AND a.kind = l.kind)
               END ORDER BY l.n)
          INTO leg_accounts
          FROM unnest(p_leg_merchants, p_leg_kinds) WITH ORDINALITY AS l(merchant_id, kind, n);
        EXIT WHEN array_position(leg_accounts, NULL) IS NULL;
        IF attempt = 2 THEN
            RAISE EXCEPTION 'ledger posting %:%: an account of its legs could not be created', p_kind, p_cause;
        END IF;
        INSERT INTO ledger_ledgeraccount (merchant_id, currency_id, kind, balance, updated_at)
        SELECT l.merchant_id, p_currency, l.kind, 0, p_created_at
          FROM unnest(p_leg_merchants, p_leg_kinds, leg_accounts) AS l(merchant_id, kind, account_id)
         WHERE l.account_id IS NULL AND l.merchant_id IS NOT NULL
         GROUP BY l.merchant_id, l.kind ORDER BY l.merchant_id, l.kind
        ON CONFLICT (merchant_id, currency_id, kind) WHERE merchant_id IS NOT NULL DO NOTHING;
        INSERT INTO ledger_ledgeraccount (merchant_id, currency_id, kind, balance, updated_at)
        SELECT NULL, p_currency, l.kind, 0, p_created_at
          FROM unnest(p_leg_merchants, p_leg_kinds, leg_accounts) AS l(merchant_id, kind, account_id)
         WHERE l.account_id IS NULL AND l.merchant_id IS NULL
         GROUP BY l.kind ORDER BY l.kind
        ON CONFLICT (currency_id, kind) WHERE merchant_id IS NULL DO NOTHING;
    END LOOP;

    -- The merchant accounts, locked in primary-key order (docs/ledger.md, "one lock order"), their balances read
    -- under the lock; the first that would go below zero is returned and nothing is written.
    FOR account IN
        SELECT a.id, a.merchant_id, a.kind, a.balance, d.delta
          FROM ledger_ledgeraccount a
          JOIN (SELECT l.account_id, sum(l.amount) AS delta
                  FROM unnest(leg_accounts, p_leg_merchants, p_leg_amounts) AS l(account_id, merchant_id, amount)
                 WHERE l.merchant_id IS NOT NULL GROUP BY l.account_id) d ON d.account_id = a.id
         ORDER BY a.id
           FOR UPDATE OF a
    LOOP
        IF short_account_id IS NULL AND account.balance + account.delta < 0 THEN
            short_account_id := account.id;
            short_merchant_id := account.merchant_id;
            short_kind := account.kind;
            short_balance := account.balance;
            short_needed := -account.delta;
        END IF;
    END LOOP;
    IF short_account_id IS NOT NULL THEN
        RETURN;
    END IF;

    INSERT INTO ledger_posting (kind, cause, merchant_id, currency_id, memo, created_at)
    VALUES (p_kind, p_cause, p_merchant_id, p_currency, p_memo, p_created_at)
    RETURNING id INTO posting_id;
    INSERT INTO ledger_entry (posting_id, account_id, currency_id, amount)
    SELECT posting_id, l.account_id, p_currency, l.amount
      FROM unnest(leg_accounts, p_leg_amounts) WITH ORDINALITY AS l(account_id, amount, n)
     ORDER BY l.n;
    UPDATE ledger_ledgeraccount a
       SET balance = a.balance + d.delta, updated_at = p_created_at
      FROM (SELECT l.account_id, sum(l.amount) AS delta
              FROM unnest(leg_accounts, p_leg_merchants, p_leg_amounts) AS l(account_id, merchant_id, amount)
             WHERE l.merchant_id IS NOT NULL GROUP BY l.account_id) d
     WHERE a.id = d.account_id;
    -- hold.place: the hold this posting froze, recorded with it (hold_place; resolved later by hold_release or
    -- hold_settle, which lock it and post through this function).
    IF p_hold_amount IS NOT NULL THEN
        INSERT INTO ledger_hold (merchant_id, currency_id, amount, cause, status, placed_by_id, created_at)
        VALUES (p_merchant_id, p_currency, p_hold_amount, p_cause, 'held', posting_id, p_created_at)
        RETURNING id INTO hold_id;
    END IF;
END
$$;
"""

LEDGER_POST_DROP_SQL = """
DROP FUNCTION IF EXISTS ledger_post(text, text, text, bigint, text, timestamptz, bigint[], text[], bigint[], bigint);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ledger", "0003_platform_accounts_reference_generation"),
    ]

    operations = [
        migrations.RunSQL(LEDGER_POST_SQL, LEDGER_POST_DROP_SQL),
    ]

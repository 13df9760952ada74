"""`ledger_post` takes the id of the hold it places (docs/ledger.md, "How a posting
is written").

A payout draws its hold's id from the holds' sequence in the INSERT that claims its (merchant, mch_order_no), before any
money lock (payout 0010: the column's default), and `hold_place` passes that id, so the hold is inserted under the id
the order already holds: payout/create no longer updates its row to set `hold_id` after the posting (an UPDATE that
wrote a new version of the row and an entry in each of its indexes). The payout's foreign key to the hold is
deferred (checked at COMMIT), so the order may name its hold before the hold exists in the same transaction.

The function also runs its statements with generic plans (`SET plan_cache_mode = force_generic_plan`): under the
default (`auto`) PL/pgSQL kept custom plans for the statements over the legs' arrays, whose known length made every
custom plan cost less than the generic one, and so planned them again on each call (0.19 ms of PostgreSQL CPU per
hold.place, docs/performance.md). The generic plans are the same index scans and nested loops. Otherwise the
function is 0004's.
"""

import importlib

from django.db import migrations

_0004 = importlib.import_module("apps.ledger.migrations.0004_ledger_post_function")

LEDGER_POST_HOLD_ID_SQL = """
CREATE OR REPLACE FUNCTION ledger_post(
    p_kind text, p_cause text, p_currency text, p_merchant_id bigint, p_memo text, p_created_at timestamptz,
    p_leg_merchants bigint[], p_leg_kinds text[], p_leg_amounts bigint[], p_hold_amount bigint,
    p_hold_id bigint DEFAULT NULL,
    OUT posting_id bigint, OUT hold_id bigint,
    OUT short_account_id bigint, OUT short_merchant_id bigint, OUT short_kind text, OUT short_balance bigint,
    OUT short_needed bigint
) LANGUAGE plpgsql
-- Generic plans for the statements inside: with custom plans (plan_cache_mode auto) PL/pgSQL planned most of them again
-- on every call, the arrays' lengths making each custom plan look cheaper than the generic one.
SET plan_cache_mode = force_generic_plan
AS $$
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
    -- hold_settle, which lock it and post through this function). p_hold_id: the id its order drew from the holds'
    -- sequence when its row was inserted (a payout's hold_id, apps.ledger.models.NextHoldId); else the next one.
    IF p_hold_amount IS NOT NULL THEN
        INSERT INTO ledger_hold (id, merchant_id, currency_id, amount, cause, status, placed_by_id, created_at)
        VALUES (COALESCE(p_hold_id, nextval('ledger_hold_id_seq')), p_merchant_id, p_currency, p_hold_amount,
                p_cause, 'held', posting_id, p_created_at)
        RETURNING id INTO hold_id;
    END IF;
END
$$;
"""

LEDGER_POST_HOLD_ID_DROP_SQL = """
DROP FUNCTION IF EXISTS ledger_post(text, text, text, bigint, text, timestamptz, bigint[], text[], bigint[], bigint,
                                    bigint);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ledger", "0004_ledger_post_function"),
    ]

    operations = [
        migrations.RunSQL(_0004.LEDGER_POST_DROP_SQL + LEDGER_POST_HOLD_ID_SQL,
                          LEDGER_POST_HOLD_ID_DROP_SQL + _0004.LEDGER_POST_SQL),
    ]

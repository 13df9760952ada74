-- The reference view's database work (bench/pgbench/run.sh): the health check, then one INSERT (autocommit).
\set n random(1, 1000000000000)
SELECT 1;
INSERT INTO "common_auditlog" ("created_at", "actor_id", "actor_label", "action", "object_type", "object_id", "old", "new", "reason") VALUES (now(), NULL, 'bench', 'bench.reference', 'bench', ':n', '{}'::jsonb, '{}'::jsonb, '') RETURNING "id";

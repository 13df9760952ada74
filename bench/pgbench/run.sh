#!/usr/bin/env bash
# What PostgreSQL alone costs one payout/create, next to the reference view's INSERT (docs/performance.md).
# Needs the database bench/profile_endpoint.py leaves behind (payments_profile: one merchant, PHP, funded):
#   uv run python bench/profile_endpoint.py payout/create --requests 50 && bench/pgbench/run.sh
# Prints, per script: transactions/s with 4 clients on one merchant, and PostgreSQL CPU per transaction.
set -euo pipefail
cd "$(dirname "$0")"
DB=${DB:-payments_profile}
PSQL=(psql -h 127.0.0.1 -U postgres -d "$DB" -Atc)
merchant=$("${PSQL[@]}" "SELECT id FROM merchants_merchant ORDER BY id LIMIT 1")
account() { "${PSQL[@]}" "SELECT id FROM ledger_ledgeraccount WHERE merchant_id = $merchant AND currency_id = 'PHP' AND kind = '$1'"; }
read -r product channel < <("${PSQL[@]}" "SELECT product_id, channel_id FROM payout_payout ORDER BY id DESC LIMIT 1" | tr '|' ' ')
vars=(-D "merchant=$merchant" -D "available=$(account available)" -D "frozen=$(account frozen)"
      -D "product=$product" -D "channel=$channel")
for script in payout reference; do
  "${PSQL[@]}" "VACUUM ANALYZE" >/dev/null
  pidstat -u -C postgres "${SECONDS_EACH:-6}" 1 > /tmp/pgbench_pidstat.$$ &
  tps=$(pgbench -h 127.0.0.1 -U postgres -n -c 4 -j 1 -T "${SECONDS_EACH:-6}" "${vars[@]}" -f "$script.sql" "$DB" \
        | awk '/^tps/ {print $3}')
  wait
  cpu=$(awk '/^Average/ && /postgres/ {s += $8} END {print s}' /tmp/pgbench_pidstat.$$)
  rm -f /tmp/pgbench_pidstat.$$
  awk -v s="$script" -v t="$tps" -v c="$cpu" \
      'BEGIN {printf "%-10s %8.1f transactions/s  postgres %6.1f %% CPU  %.2f ms CPU per transaction\n", s, t, c, c * 10 / t}'
done

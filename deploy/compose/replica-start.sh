#!/bin/sh
# The replica: a copy of the primary on its first start (pg_basebackup -R writes standby.signal and the primary's
# address), then PostgreSQL as a hot standby streaming from it.
set -e
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  until pg_basebackup -h postgres -U replicator -D "$PGDATA" -R -X stream; do sleep 2; done
  chmod 700 "$PGDATA"
fi
exec postgres

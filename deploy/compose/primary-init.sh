#!/bin/sh
# The primary's first start (docker-entrypoint-initdb.d): a role the replica streams with, allowed to connect for
# replication from the compose network.
set -e
psql -v ON_ERROR_STOP=1 -U postgres -c "CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD '$REPLICATION_PASSWORD'"
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"

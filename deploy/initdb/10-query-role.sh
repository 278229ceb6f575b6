#!/bin/sh
# Run once by the postgres image when it makes the database (docker-entrypoint-initdb.d): the role
# of ad-hoc queries, reading the query views only (deploy/query-role.sql, docs/deploy.md).
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
     -v writer="$POSTGRES_USER" -v reader=sweetspot_reader -v reader_password="$SWEETSPOT_QUERY_DB_PASSWORD" \
     -f /etc/sweetspot/query-role.sql

-- The role the dashboard's Query page and `python -m app query` run as on PostgreSQL: it can read the
-- query views (schema sweetspot_query) and nothing else: no raw table, no pg_authid / pg_shadow /
-- pg_hba_file_rules, no pg_stat_reset() (docs/security.md). Run as a superuser, once per database:
--   psql -v ON_ERROR_STOP=1 -v writer=sweetspot -v reader=sweetspot_reader -v reader_password='...' \
--        -d sweetspot -f deploy/query-role.sql
-- then point query.db_url (or SWEETSPOT_QUERY_DB_URL) at postgresql://sweetspot_reader@HOST/DB with
-- its password in SWEETSPOT_QUERY_DB_PASSWORD. Safe to run again (an existing role gets the password).
-- writer: the role db_url names (it owns the tables and makes the views); reader: the one to make.
SELECT NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = :'reader') AS reader_missing \gset
\if :reader_missing
CREATE ROLE :"reader" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
\endif
ALTER ROLE :"reader" LOGIN PASSWORD :'reader_password';
ALTER ROLE :"reader" SET default_transaction_read_only = on;
-- the views' schema, made here when the collector has not made it yet (it then finds it), owned by the writer
CREATE SCHEMA IF NOT EXISTS sweetspot_query AUTHORIZATION :"writer";
GRANT USAGE ON SCHEMA sweetspot_query TO :"reader";
GRANT SELECT ON ALL TABLES IN SCHEMA sweetspot_query TO :"reader";
-- the views the writer makes later (a migration, an upgrade that makes them anew) are readable too
ALTER DEFAULT PRIVILEGES FOR ROLE :"writer" IN SCHEMA sweetspot_query GRANT SELECT ON TABLES TO :"reader";
-- nothing of the public schema (the raw tables): PostgreSQL 15 already keeps CREATE from PUBLIC there
REVOKE ALL ON SCHEMA public FROM :"reader";

"""Storage: schema and migrations, the one writer, rollups and retention, and the query facade."""

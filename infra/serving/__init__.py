"""Serving: lakehouse tables published into a real PostgreSQL, which every SQL client and BI tool speaks.

The lakehouse stays the source of truth. A sync brings a PostgreSQL table `<namespace>.<table>` to exactly one
snapshot (Iceberg) or version (Delta) of the lakehouse table, in one transaction that also records the synced
snapshot, so a sync killed anywhere leaves the previous state and the next one completes it.

- `config`: the `TRIBUTARY_SERVE_*`, `TRIBUTARY_PG_PORT` and `TRIBUTARY_SQL_*` settings;
- `server`: the home's embedded server (`tributary serve start|stop|status`) and its roles;
- `pgtypes`: lakehouse (Arrow) types as PostgreSQL types, and rows as COPY input;
- `sync`: one table's sync, and the synced state that `tributary tables` and Dagster show.
"""

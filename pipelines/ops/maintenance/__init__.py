"""Table maintenance in Spark: compaction, manifest rewrite, snapshot expiry and orphan-file removal.

Every micro-batch commits a few small files and a snapshot; left alone, a table slows down (many small files,
many manifests) and its metadata and disk use grow forever. `run_maintenance` applies a table's
`MaintenancePolicy` with Iceberg's procedures (`CALL <catalog>.system.<procedure>(table => 'ns.t', ...)`) and
reports the table's shape before and after.

`runner` applies a policy; `compaction` rewrites data files and manifests, `cleanup` expires snapshots and removes
orphan files, `shape` measures a table, `procedures` calls Iceberg's procedures (operation names, retries) and
`policies` finds a table's policy; `delta` plans the same maintenance for Delta Lake.

Safe for running streams:
- compaction and manifest rewrites commit `replace` snapshots, which Iceberg stream readers skip, and never
  change rows; a commit that conflicts with a concurrent one is retried (see `procedures.call_procedure`);
- snapshot expiry never removes a snapshot a downstream consumer's checkpoint restarts from, or any later one
  (read from the checkpoints, see `pipelines.io.checkpoints`): a time-based expiry is held back to the oldest
  needed snapshot; explicitly naming a needed snapshot is refused;
- orphan files are only removed when older than the policy's retention, never younger than 24 hours, because
  the files of a commit still in flight look exactly like orphans.
"""

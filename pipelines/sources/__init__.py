"""What a table reads, one module per kind (landed files, Kafka, a table stream, a reference table), each
implementing `pipelines.sources.base.SourceKind`; `pipelines.sources.kinds.kind_of` picks it."""

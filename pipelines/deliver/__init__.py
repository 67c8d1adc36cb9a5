"""Sinks: a table's new rows delivered, exactly once, to a destination outside the lakehouse (docs/sinks.md).

A sink (`tb.sink`) follows one registry table. Each run reads what the table's commits changed since the commit
the destination last received (`changes`), and the destination takes those rows and the new position in one
transaction of its own (`kafka_topic`, `jdbc_table`, `table_path`): a run killed anywhere leaves the destination
as it was or with the whole delivery, never half of it, and the next run starts from what the destination says
it has.
"""

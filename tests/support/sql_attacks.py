"""The write and escape attempts of the SQL security suite (tests/infra/sql/test_sql_security.py), with their refusals.

Statements are templates: `{victim}` is a folder that must stay empty, `{table_data}` a table's data folder,
`{data_file}` one of its Parquet files, `{catalog_db}` the catalog database, `{cache}` the snapshot cache,
`{home}` the platform home, `{cwd}` the DuckDB process's working directory. Refusals are regular expressions.
"""

DIRECTORY = r"INSERT OVERWRITE DIRECTORY is refused: it writes files"
FILE_PATH = r"reading files by path \({}\.`{}`\) is refused: only lakehouse tables can be read"
REFLECTION = r"function {} is refused: it calls Java methods on the server"

# Refused by both Spark engines (the same policy): statement template -> refusal (a regex).
SPARK_ATTACKS = {
    "insert_directory": (
        "INSERT OVERWRITE DIRECTORY '{victim}/out' USING csv SELECT * FROM gold.daily_revenue",
        DIRECTORY,
    ),
    "insert_directory_over_table": ("INSERT OVERWRITE DIRECTORY '{table_data}' USING csv SELECT 1 AS x", DIRECTORY),
    "insert_local_directory": ("INSERT OVERWRITE LOCAL DIRECTORY '{victim}/out' SELECT 1 AS x", DIRECTORY),
    "text_file": ("SELECT * FROM text.`/etc/passwd`", FILE_PATH.format("text", "/etc/passwd")),
    "csv_catalog_db": ("SELECT * FROM csv.`{catalog_db}`", FILE_PATH.format("csv", ".*catalog.db")),
    "parquet_data_file": ("SELECT count(*) FROM `parquet`.`{data_file}`", FILE_PATH.format("parquet", ".*")),
    "reflect": (
        "SELECT reflect('org.apache.spark.util.Utils', 'createDirectory', '{victim}', 'x')",
        REFLECTION.format("reflect"),
    ),
    "java_method": (
        "SELECT * FROM gold.daily_revenue WHERE category IN "
        "(SELECT JAVA_METHOD('org.apache.spark.util.Utils', 'createDirectory', '{victim}', 'x'))",
        REFLECTION.format("java_method"),
    ),
    "transform": (
        "SELECT TRANSFORM(1) USING 'touch {victim}/pwned' AS (y)",
        r"TRANSFORM \.\.\. USING is refused: it runs a program",
    ),
    "set_catalog": (
        "SET spark.sql.catalog.rw2=org.apache.iceberg.spark.SparkCatalog",
        r"SET is refused: the session configuration is fixed",
    ),
    "reset": ("RESET", r"RESET is refused"),
    "insert": ("INSERT INTO gold.daily_revenue SELECT * FROM gold.daily_revenue", r"INSERT INTO is refused: read-only"),
    "cte_insert": (
        "WITH s AS (SELECT * FROM gold.daily_revenue) INSERT INTO gold.daily_revenue SELECT * FROM s",
        r"INSERT INTO is refused",
    ),
    "explain_insert": (
        "EXPLAIN INSERT INTO gold.daily_revenue SELECT * FROM gold.daily_revenue",
        r"INSERT INTO is refused",
    ),
    "delete": ("DELETE FROM gold.daily_revenue WHERE orders > 0", r"DELETE FROM TABLE is refused"),
    "create_table": ("CREATE TABLE gold.scratch (a INT)", r"CREATE TABLE is refused"),
    "drop_table": ("DROP TABLE gold.daily_revenue", r"DROP TABLE is refused"),
    "create_namespace": ("CREATE NAMESPACE scratch", r"CREATE NAMESPACE is refused"),
    "add_jar": ("ADD JAR {victim}/x.jar", r"ADD JARS is refused"),
    "cache_table": ("CACHE TABLE gold.daily_revenue", r"CACHE TABLE is refused"),
}

# Refused by the DuckDB engine; the snapshot cache is the only readable folder.
FILE_ACCESS = r"file access is refused: tributary sql reads lakehouse tables only \(.*Cannot access file"
DUCKDB_ATTACKS = {
    "insert": ("INSERT INTO gold.daily_revenue SELECT * FROM gold.daily_revenue", r"INSERT statements are refused"),
    "drop": ("DROP TABLE gold.daily_revenue", r"DROP statements are refused"),
    "copy": ("COPY (SELECT 1) TO '{victim}/out.csv'", r"COPY statements are refused"),
    "attach": ("ATTACH '{catalog_db}' AS cat (TYPE sqlite)", r"ATTACH statements are refused"),
    "set": ("SET enable_external_access = true", r"SET statements are refused"),
    "install": ("INSTALL sqlite", r"INSTALL statements are refused"),
    "read_etc": ("SELECT * FROM read_csv('/etc/passwd')", FILE_ACCESS + r' "/etc/passwd"'),
    "read_cwd_tmp": ("SELECT content FROM read_text('.tmp/secret.txt')", FILE_ACCESS + r' "\.tmp/secret\.txt"'),
    "read_cwd_tmp_absolute": ("SELECT content FROM read_text('{cwd}/.tmp/secret.txt')", FILE_ACCESS),
    "cache_traversal": ("SELECT content FROM read_blob('{cache}/../catalog.db')", FILE_ACCESS),
    "catalog_db": ("SELECT content FROM read_blob('{catalog_db}')", FILE_ACCESS),
    "glob_home": ("SELECT * FROM glob('{home}/*')", FILE_ACCESS),
}

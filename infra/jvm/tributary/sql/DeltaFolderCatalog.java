package tributary.sql;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.analysis.NoSuchNamespaceException;
import org.apache.spark.sql.catalyst.analysis.NoSuchTableException;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.NamespaceChange;
import org.apache.spark.sql.connector.catalog.SupportsNamespaces;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.catalog.TableChange;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.delta.DeltaTimeTravelSpec;
import org.apache.spark.sql.delta.catalog.DeltaTableV2;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import scala.Option;

/**
 * The Delta tables of a warehouse folder as a read-only Spark catalog: namespace {@code ns} is the folder
 * {@code <root>/ns} and table {@code ns.t} the folder {@code <root>/ns/t} holding a {@code _delta_log}.
 *
 * <p>Tributary's Delta tables have no metastore entry (the folders are the catalog, as for delta-rs and DuckDB), so
 * this catalog lists them live: a table written after a session (or the SQL server) started is visible to its next
 * query. Tables load as delta-spark's {@link DeltaTableV2}; {@code VERSION AS OF} reads a past version. Everything
 * that would create, change or drop a table or namespace is refused: Tributary's runs own the tables.
 */
public final class DeltaFolderCatalog implements TableCatalog, SupportsNamespaces {
  private static final String LOG = "_delta_log";
  private String name;
  private Path root;

  @Override
  public void initialize(String name, CaseInsensitiveStringMap options) {
    this.name = name;
    String configured = options.get("root");
    if (configured == null || configured.isEmpty()) {
      throw new IllegalArgumentException("catalog " + name + " needs option 'root' (the Delta warehouse folder)");
    }
    this.root = new Path(configured);
  }

  @Override
  public String name() {
    return name;
  }

  private FileSystem fs() {
    try {
      return root.getFileSystem(SparkSession.active().sessionState().newHadoopConf());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private List<String> children(Path folder, boolean tables) {
    List<String> out = new ArrayList<>();
    try {
      FileSystem fs = fs();
      if (!fs.exists(folder)) {
        return out;
      }
      for (FileStatus status : fs.listStatus(folder)) {
        String child = status.getPath().getName();
        if (!status.isDirectory() || !child.matches("[a-z][a-z0-9_]*")) {
          continue;
        }
        if (!tables || fs.exists(new Path(status.getPath(), LOG))) {
          out.add(child);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out;
  }

  private Path tablePath(Identifier ident) throws NoSuchTableException {
    String[] ns = ident.namespace();
    if (ns.length != 1) {
      throw new NoSuchTableException(ident);
    }
    Path path = new Path(new Path(root, ns[0]), ident.name());
    try {
      if (!fs().exists(new Path(path, LOG))) {
        throw new NoSuchTableException(ident);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return path;
  }

  @Override
  public Identifier[] listTables(String[] namespace) throws NoSuchNamespaceException {
    if (!namespaceExists(namespace)) {
      throw new NoSuchNamespaceException(namespace);
    }
    return children(new Path(root, namespace[0]), true).stream()
        .map(t -> Identifier.of(namespace, t))
        .toArray(Identifier[]::new);
  }

  @Override
  public Table loadTable(Identifier ident) throws NoSuchTableException {
    return load(ident, Option.empty());
  }

  @Override
  public Table loadTable(Identifier ident, String version) throws NoSuchTableException {
    Option<Object> at = Option.apply(Long.parseLong(version));
    return load(ident, Option.apply(new DeltaTimeTravelSpec(Option.empty(), at, Option.apply("tributary"), false)));
  }

  private Table load(Identifier ident, Option<DeltaTimeTravelSpec> travel) throws NoSuchTableException {
    return new DeltaTableV2(
        SparkSession.active(),
        tablePath(ident),
        Option.empty(),
        Option.empty(),
        travel,
        scala.collection.immutable.Map$.MODULE$.empty());
  }

  @Override
  public String[][] listNamespaces() {
    return children(root, false).stream().map(n -> new String[] {n}).toArray(String[][]::new);
  }

  @Override
  public String[][] listNamespaces(String[] namespace) throws NoSuchNamespaceException {
    if (!namespaceExists(namespace)) {
      throw new NoSuchNamespaceException(namespace);
    }
    return new String[0][];
  }

  @Override
  public boolean namespaceExists(String[] namespace) {
    return namespace.length == 1 && children(root, false).contains(namespace[0]);
  }

  @Override
  public Map<String, String> loadNamespaceMetadata(String[] namespace) throws NoSuchNamespaceException {
    if (!namespaceExists(namespace)) {
      throw new NoSuchNamespaceException(namespace);
    }
    return Map.of();
  }

  private static UnsupportedOperationException refused(String what) {
    return new UnsupportedOperationException(
        what + " is not possible through Spark SQL: Tributary's runs own its Delta tables");
  }

  @Override
  public Table createTable(
      Identifier ident, StructType schema, Transform[] partitions, Map<String, String> properties) {
    throw refused("CREATE TABLE");
  }

  @Override
  public Table alterTable(Identifier ident, TableChange... changes) {
    throw refused("ALTER TABLE");
  }

  @Override
  public boolean dropTable(Identifier ident) {
    throw refused("DROP TABLE");
  }

  @Override
  public void renameTable(Identifier oldIdent, Identifier newIdent) {
    throw refused("ALTER TABLE RENAME");
  }

  @Override
  public void createNamespace(String[] namespace, Map<String, String> metadata) {
    throw refused("CREATE NAMESPACE");
  }

  @Override
  public void alterNamespace(String[] namespace, NamespaceChange... changes) {
    throw refused("ALTER NAMESPACE");
  }

  @Override
  public boolean dropNamespace(String[] namespace, boolean cascade) {
    throw refused("DROP NAMESPACE");
  }
}

package tributary.sql;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.TreeSet;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.analysis.UnresolvedFunction;
import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.analysis.UnresolvedTableOrView;
import org.apache.spark.sql.catalyst.expressions.CallMethodViaReflection;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.SubqueryExpression;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.InsertIntoDir;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.ParsedStatement;
import org.apache.spark.sql.catalyst.plans.logical.ScriptTransformation;
import org.apache.spark.sql.execution.command.DescribeQueryCommand;
import org.apache.spark.sql.execution.command.ExplainCommand;
import org.apache.spark.sql.execution.command.ResetCommand;
import org.apache.spark.sql.execution.command.SetCommand;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.datasources.DataSource;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.execution.datasources.v2.FileTable;
import scala.Option;
import scala.Tuple2;
import scala.collection.Iterator;
import scala.collection.Seq;

/**
 * What the read-only SQL endpoint accepts. Each check returns null (accepted) or the one-line refusal.
 *
 * <ul>
 *   <li>Statements: queries (SELECT, WITH, VALUES, TABLE, FROM ...), SHOW, DESCRIBE, EXPLAIN of a query and USE.
 *       Every other statement is a Spark {@code Command} or {@code ParsedStatement} and is refused, as are the
 *       query-shaped writes and escapes: INSERT ... DIRECTORY and TRANSFORM ... USING (runs a program).
 *   <li>Relations: reading a file by path ({@code csv.`/path`}) is refused; only catalog tables are read.
 *   <li>Functions: reflection ({@code reflect}, {@code java_method}) is refused.
 *   <li>Configuration: a session whose SQL configuration differs from the server's (connect-time
 *       {@code set:hiveconf:}/{@code set:hivevar:} overrides) runs nothing.
 * </ul>
 */
public final class ReadOnlyPolicy {
  public static final String READ_ONLY =
      "read-only SQL runs queries only (SELECT, WITH, VALUES, SHOW, DESCRIBE, EXPLAIN, USE)";

  /** Statements that only read metadata; anything else that is not a query is refused. */
  private static final Set<String> ALLOWED_STATEMENTS =
      Set.of(
          "SetCatalogAndNamespace", // USE
          "ShowTables",
          "ShowTableExtended",
          "ShowNamespaces",
          "ShowColumns",
          "ShowCatalogsCommand",
          "ShowCurrentNamespaceCommand",
          "ShowFunctions",
          "ShowTableProperties",
          "ShowCreateTable",
          "ShowPartitions",
          "ShowViews",
          "DescribeRelation",
          "DescribeColumn",
          "DescribeNamespace",
          "DescribeFunction",
          // the same statements as Spark 4.1 may parse them (as commands)
          "ShowNamespacesCommand",
          "ShowTablesCommand",
          "ShowColumnsCommand",
          "ShowFunctionsCommand",
          "ShowTablePropertiesCommand",
          "ShowCreateTableCommand",
          "ShowPartitionsCommand",
          "ShowViewsCommand",
          "DescribeTableCommand",
          "DescribeColumnCommand",
          "DescribeNamespaceCommand",
          "DescribeFunctionCommand");

  /** Plan nodes that are neither Command nor ParsedStatement but write or escape (found by scanning Spark 3.5 and 4.1). */
  private static final Set<String> WRITING_NODES =
      Set.of(
          "CreateTable",
          "WriteFiles",
          "WriteToDataSourceV2",
          "MergeRows",
          "InsertIntoDataSourceDirCommand",
          "InsertIntoHiveDirCommand",
          "InsertIntoHadoopFsRelationCommand",
          "InsertIntoHiveTable");

  /**
   * Statements that are neither Command nor ParsedStatement since Spark 4: CALL of a procedure (Iceberg's
   * maintenance procedures write) and EXECUTE IMMEDIATE (runs SQL text built at run time).
   */
  private static final Set<String> STATEMENT_NODES =
      Set.of("Call", "UnresolvedExecuteImmediate", "ExecuteImmediateQuery", "ExecuteImmediateCommand");

  private static final Set<String> REFLECTION = Set.of("reflect", "java_method", "try_reflect");

  /**
   * Session settings the Thrift Server or the Hive JDBC driver sets on every connection (Spark 4.1's Thrift Server
   * also sets how binary values are shown).
   */
  private static final Set<String> SESSION_KEYS =
      Set.of(
          "spark.sql.datetime.java8API.enabled",
          "hive.server2.thrift.resultset.default.fetch.size",
          "spark.sql.binaryOutputStyle");

  private ReadOnlyPolicy() {}

  /** The refusal for a parsed statement, or null if it is a read-only query. */
  public static String parsedRefusal(SparkSession session, LogicalPlan plan) {
    if (plan instanceof ExplainCommand) {
      return parsedRefusal(session, ((ExplainCommand) plan).logicalPlan());
    }
    if (plan instanceof DescribeQueryCommand) {
      return parsedRefusal(session, ((DescribeQueryCommand) plan).plan());
    }
    if (plan instanceof SetCommand || plan instanceof ResetCommand) {
      String verb = plan instanceof SetCommand ? "SET" : "RESET";
      return verb + " is refused: the session configuration is fixed; " + READ_ONLY;
    }
    boolean metadata = ALLOWED_STATEMENTS.contains(plan.getClass().getSimpleName());
    return walk(session, plan, metadata, false);
  }

  /** The refusal for an analysed plan (a second look, after names are resolved), or null. */
  public static String analyzedRefusal(LogicalPlan plan) {
    return walk(null, plan, false, true);
  }

  /**
   * The refusal for a session whose SQL configuration differs from the server's, or null. A value is the server's
   * if it is the one every session starts from (Spark's shared configuration) or the JVM system property of that
   * key (spark-submit and HiveServer2 publish the server's settings as system properties, and the Thrift Server
   * copies those into each session). A client can change neither.
   */
  public static String sessionRefusal(SparkSession session) {
    SparkConf base = session.sharedState().conf();
    Set<String> changed = new TreeSet<>();
    Iterator<Tuple2<String, String>> entries = session.sessionState().conf().getAllConfs().iterator();
    while (entries.hasNext()) {
      Tuple2<String, String> entry = entries.next();
      if (SESSION_KEYS.contains(entry._1())) {
        continue;
      }
      Option<String> shared = base.getOption(entry._1());
      boolean server =
          (shared.isDefined() && shared.get().equals(entry._2()))
              || entry._2().equals(System.getProperty(entry._1()));
      if (!server) {
        changed.add(entry._1());
      }
    }
    if (changed.isEmpty()) {
      return null;
    }
    return "this session is refused: it changed the server's configuration ("
        + String.join(", ", changed)
        + "); the read-only SQL server's configuration is fixed, connect without set:hiveconf:/set:hivevar: settings";
  }

  private static String walk(SparkSession session, LogicalPlan root, boolean rootAllowed, boolean analyzed) {
    Deque<LogicalPlan> plans = new ArrayDeque<>();
    plans.push(root);
    while (!plans.isEmpty()) {
      LogicalPlan node = plans.pop();
      if (!(rootAllowed && node == root)) {
        String refused = analyzed ? analyzedNodeRefusal(node) : parsedNodeRefusal(session, node);
        if (refused != null) {
          return refused;
        }
      }
      for (Expression expression : list(node.expressions())) {
        String refused = expressionRefusal(expression, plans);
        if (refused != null) {
          return refused;
        }
      }
      plans.addAll(list(node.children()));
      for (Object inner : list(node.innerChildren())) {
        if (inner instanceof LogicalPlan) {
          plans.push((LogicalPlan) inner);
        }
      }
    }
    return null;
  }

  private static String parsedNodeRefusal(SparkSession session, LogicalPlan node) {
    if (node instanceof Command
        || node instanceof ParsedStatement
        || STATEMENT_NODES.contains(node.getClass().getSimpleName())) {
      return statementName(node) + " is refused: " + READ_ONLY;
    }
    String write = writeRefusal(node);
    if (write != null) {
      return write;
    }
    Seq<String> name = null;
    if (node instanceof UnresolvedRelation) {
      name = ((UnresolvedRelation) node).multipartIdentifier();
    } else if (node instanceof UnresolvedTableOrView) {
      name = ((UnresolvedTableOrView) node).multipartIdentifier();
    }
    // `csv.`/path``, and `spark_catalog.delta.`/path`` (delta-spark's session catalog reads Delta folders by path)
    if (name != null && name.size() >= 2 && isDataSource(session, name.apply(name.size() - 2))) {
      return "reading files by path ("
          + name.apply(name.size() - 2)
          + ".`"
          + name.last()
          + "`) is refused: only lakehouse tables can be read; "
          + READ_ONLY;
    }
    return null;
  }

  private static String analyzedNodeRefusal(LogicalPlan node) {
    String common = writeRefusal(node);
    if (common != null) {
      return common;
    }
    String kind = node.getClass().getSimpleName();
    boolean files =
        (node instanceof LogicalRelation && !isHomeDeltaTable((LogicalRelation) node))
            || kind.equals("HiveTableRelation")
            || (node instanceof DataSourceV2Relation && ((DataSourceV2Relation) node).table() instanceof FileTable);
    if (files) {
      return "reading files or non-lakehouse sources (" + kind + ") is refused: only lakehouse tables can be read";
    }
    return null;
  }

  /**
   * Whether {@code relation} reads files of the home's Delta tables: delta-spark reads a table of the Delta catalog
   * ({@code spark.sql.catalog.delta}, see {@link DeltaFolderCatalog}) as a file relation over its data files, and
   * its log (JSON commits, Parquet checkpoints) with file relations of its own; all lie under that catalog's root.
   * No other file relation can reach this check: the parser refuses reading files by path.
   */
  private static boolean isHomeDeltaTable(LogicalRelation relation) {
    if (!(relation.relation() instanceof HadoopFsRelation)) {
      return false;
    }
    HadoopFsRelation files = (HadoopFsRelation) relation.relation();
    FileIndex index = files.location();
    // The session that planned the relation: the analysts' one, whatever session is active on this thread.
    String root = files.sparkSession().conf().get("spark.sql.catalog.delta.root", "");
    if (root.isEmpty()) {
      return false;
    }
    String under = Path.getPathWithoutSchemeAndAuthority(new Path(root)).toString() + "/";
    for (Path path : list(index.rootPaths())) {
      if (!Path.getPathWithoutSchemeAndAuthority(path).toString().startsWith(under)) {
        return false;
      }
    }
    return true;
  }

  private static String writeRefusal(LogicalPlan node) {
    if (node instanceof InsertIntoDir) {
      return "INSERT OVERWRITE DIRECTORY is refused: it writes files; " + READ_ONLY;
    }
    if (node instanceof ScriptTransformation) {
      return "TRANSFORM ... USING is refused: it runs a program on the server; " + READ_ONLY;
    }
    if (WRITING_NODES.contains(node.getClass().getSimpleName())) {
      return statementName(node) + " is refused: it writes; " + READ_ONLY;
    }
    return null;
  }

  private static String expressionRefusal(Expression root, Deque<LogicalPlan> plans) {
    Deque<Expression> expressions = new ArrayDeque<>();
    expressions.push(root);
    while (!expressions.isEmpty()) {
      Expression expression = expressions.pop();
      String function = null;
      if (expression instanceof UnresolvedFunction) {
        function = ((UnresolvedFunction) expression).nameParts().last().toLowerCase(Locale.ROOT);
      } else if (expression instanceof CallMethodViaReflection) {
        function = "reflect";
      }
      if (function != null && REFLECTION.contains(function)) {
        return "function " + function + " is refused: it calls Java methods on the server; " + READ_ONLY;
      }
      if (expression instanceof SubqueryExpression) {
        plans.push(((SubqueryExpression) expression).plan());
      }
      expressions.addAll(list(expression.children()));
    }
    return null;
  }

  private static boolean isDataSource(SparkSession session, String name) {
    try {
      DataSource.lookupDataSource(name, session.sessionState().conf());
      return true;
    } catch (Throwable notASource) { // ClassNotFound, DATA_SOURCE_NOT_FOUND: a namespace, not a format
      return false;
    }
  }

  /** "InsertIntoStatement" -> "INSERT INTO", "DropTable" -> "DROP TABLE", "AddJarsCommand" -> "ADD JARS". */
  static String statementName(LogicalPlan node) {
    String name = node.getClass().getSimpleName().replaceAll("(Command|Statement|Exec)$", "");
    String words = name.replaceAll("([a-z0-9])([A-Z])", "$1 $2").toUpperCase(Locale.ROOT);
    return words.isEmpty() ? node.nodeName() : words;
  }

  private static <T> List<T> list(Seq<T> seq) {
    if (seq == null) {
      return Collections.emptyList();
    }
    List<T> out = new ArrayList<>(seq.size());
    Iterator<T> it = seq.iterator();
    while (it.hasNext()) {
      out.add(it.next());
    }
    return out;
  }
}

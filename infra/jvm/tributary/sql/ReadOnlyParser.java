package tributary.sql;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.parser.ParseException;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.catalyst.parser.ParameterContext;
import scala.collection.immutable.Seq;

/** Spark's parser, refusing every statement that is not a read-only query before anything runs. */
public final class ReadOnlyParser implements ParserInterface {
  private final SparkSession session;
  private final ParserInterface delegate;

  public ReadOnlyParser(SparkSession session, ParserInterface delegate) {
    this.session = session;
    this.delegate = delegate;
  }

  private LogicalPlan checked(LogicalPlan plan) {
    String refused = ReadOnlyPolicy.parsedRefusal(session, plan);
    if (refused != null) {
      throw new ReadOnlyViolation(refused);
    }
    return plan;
  }

  private void checkSession() {
    String refused = ReadOnlyPolicy.sessionRefusal(session);
    if (refused != null) {
      throw new ReadOnlyViolation(refused);
    }
  }

  @Override
  public LogicalPlan parsePlan(String sqlText) throws ParseException {
    checkSession();
    return checked(delegate.parsePlan(sqlText));
  }

  // Parameterized statements (`spark.sql(text, args)`, `EXECUTE IMMEDIATE`) are parsed here since Spark 4.1.
  @Override
  public LogicalPlan parsePlanWithParameters(String sqlText, ParameterContext parameters) throws ParseException {
    checkSession();
    return checked(delegate.parsePlanWithParameters(sqlText, parameters));
  }

  @Override
  public LogicalPlan parseQuery(String sqlText) throws ParseException {
    checkSession();
    return checked(delegate.parseQuery(sqlText));
  }

  @Override
  public Expression parseExpression(String sqlText) throws ParseException {
    return delegate.parseExpression(sqlText);
  }

  @Override
  public TableIdentifier parseTableIdentifier(String sqlText) throws ParseException {
    return delegate.parseTableIdentifier(sqlText);
  }

  @Override
  public FunctionIdentifier parseFunctionIdentifier(String sqlText) throws ParseException {
    return delegate.parseFunctionIdentifier(sqlText);
  }

  @Override
  public Seq<String> parseMultipartIdentifier(String sqlText) throws ParseException {
    return delegate.parseMultipartIdentifier(sqlText);
  }

  @Override
  public StructType parseRoutineParam(String sqlText) throws ParseException {
    return delegate.parseRoutineParam(sqlText);
  }

  @Override
  public StructType parseTableSchema(String sqlText) throws ParseException {
    return delegate.parseTableSchema(sqlText);
  }

  @Override
  public DataType parseDataType(String sqlText) throws ParseException {
    return delegate.parseDataType(sqlText);
  }
}

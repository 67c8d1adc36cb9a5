package tributary.landing;

import java.time.Instant;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

/**
 * One value for every row of a batch (its id, its ingestion time), kept out of the code Spark generates.
 *
 * <p>Why not a literal: Spark writes a long or timestamp literal into the Java source of the query's generated code,
 * so a new value per batch means new source: the query is compiled again and its classes run cold (a 1 M-row landing
 * read took 0.2-0.3 s longer than with a fixed value). A function object is passed to the generated code by
 * reference, so every batch runs the same, already compiled, code.
 *
 * <p>The argument is ignored: a function of no column would count as a constant and be folded into a literal. Pass
 * any non-constant column of the rows.
 */
public final class BatchConstant implements UDF1<Object, Object> {
  private final Object value;
  private final transient DataType type;

  private BatchConstant(Object value, DataType type) {
    this.value = value;
    this.type = type;
  }

  /** A BIGINT value. */
  public static BatchConstant ofLong(long value) {
    return new BatchConstant(value, DataTypes.LongType);
  }

  /** A TIMESTAMP value, given in microseconds since the epoch. */
  public static BatchConstant ofMicros(long micros) {
    long seconds = Math.floorDiv(micros, 1_000_000L);
    Instant instant = Instant.ofEpochSecond(seconds, Math.floorMod(micros, 1_000_000L) * 1000L);
    return new BatchConstant(instant, DataTypes.TimestampType);
  }

  /**
   * The value as a column named {@code name} in plans, anchored on {@code anchor}. Built here rather than through
   * the gateway: called from Python, {@code functions.udf} may resolve to its untyped Scala overload, which Spark
   * refuses.
   */
  public Column column(Column anchor, String name) {
    return functions.udf(this, type).withName(name).apply(anchor);
  }

  @Override
  public Object call(Object ignored) {
    return value;
  }
}

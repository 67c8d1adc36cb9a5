package tributary.sql;

import org.apache.spark.sql.SparkSessionExtensions;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * The read-only SQL endpoint as a Spark session extension ({@code spark.sql.extensions=tributary.sql.ReadOnlyExtension}).
 *
 * <p>Every session gets a parser that refuses anything but queries before Spark analyses or runs it, and a check
 * rule that inspects every analysed plan once more (see {@link ReadOnlyPolicy}). Both also refuse to work for a
 * session whose configuration differs from the server's.
 */
public final class ReadOnlyExtension extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectParser((session, delegate) -> new ReadOnlyParser(session, delegate));
    extensions.injectCheckRule(
        session ->
            plan -> {
              String refused = ReadOnlyPolicy.sessionRefusal(session);
              if (refused == null) {
                refused = ReadOnlyPolicy.analyzedRefusal(plan);
              }
              if (refused != null) {
                throw new ReadOnlyViolation(refused);
              }
              return BoxedUnit.UNIT;
            });
    return BoxedUnit.UNIT;
  }
}

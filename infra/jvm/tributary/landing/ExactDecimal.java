package tributary.landing;

import java.math.BigDecimal;
import java.math.BigInteger;
import org.apache.spark.sql.api.java.UDF2;

/**
 * A decimal parsed at a wider scale, given at the declared {@code scale} when that drops no nonzero digit, else NULL
 * (NULL for NULL). Registered once per declared decimal type, which is its result type.
 *
 * <p>The wide type has exactly the declared type's integer digits, so an exact value always fits the declared
 * precision. One division of the unscaled value; Spark's own test (cast down, cast back up, compare) is three
 * arbitrary-precision operations, and a CASE over them evaluates the cast again.
 */
public class ExactDecimal implements UDF2<BigDecimal, Integer, BigDecimal> {
  private transient int powerShift = -1;
  private transient BigInteger power;

  @Override
  public BigDecimal call(BigDecimal wide, Integer scale) {
    if (wide == null) {
      return null;
    }
    int shift = wide.scale() - scale;
    if (shift <= 0) {
      return wide.setScale(scale);  // as many fractional digits or fewer: exact
    }
    if (shift != powerShift) {
      power = BigInteger.TEN.pow(shift);
      powerShift = shift;
    }
    BigInteger[] quotientAndRemainder = wide.unscaledValue().divideAndRemainder(power);
    return quotientAndRemainder[1].signum() == 0 ? new BigDecimal(quotientAndRemainder[0], scale) : null;
  }
}

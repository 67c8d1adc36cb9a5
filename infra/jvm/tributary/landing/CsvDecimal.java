package tributary.landing;

import java.math.BigDecimal;
import org.apache.spark.sql.api.java.UDF3;

/**
 * A CSV cell's text as a decimal of {@code precision} and {@code scale}, NULL when Spark's CSV parser would not read
 * it exactly as that type: text it rejects, more integer digits than the type holds, or a nonzero digit beyond the
 * scale (which Spark would round silently). NULL for NULL.
 *
 * <p>The text is read as Spark's CSV parser reads a decimal in the default locale ({@code en-US}): every comma
 * removed, then {@code new BigDecimal(text)}. Spark removes the commas with a regular expression compiled per value,
 * then rounds to a wide scale; reading the cell as a string and converting it here costs a fraction of that.
 */
public class CsvDecimal implements UDF3<String, Integer, Integer, BigDecimal> {
  @Override
  public BigDecimal call(String text, Integer precision, Integer scale) {
    if (text == null) {
      return null;
    }
    BigDecimal value;
    try {
      value = new BigDecimal(text.indexOf(',') < 0 ? text : text.replace(",", ""));
    } catch (NumberFormatException e) {
      return null;
    }
    if (value.precision() - value.scale() > precision - scale) {
      return null;  // more integer digits than the type holds (tested first: an exponent can make them many)
    }
    if (value.scale() > scale && value.stripTrailingZeros().scale() > scale) {
      return null;  // a nonzero digit beyond the scale
    }
    return value.setScale(scale);
  }
}

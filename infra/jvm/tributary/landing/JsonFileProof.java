package tributary.landing;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.math.BigDecimal;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.IntStream;
import org.apache.spark.sql.catalyst.json.JSONOptions;

/**
 * Whether Spark's JSON reader reads a landed JSON-lines file exactly as Tributary's line parse does, decided from the
 * file's bytes on the driver before a batch is read. A file qualifies when every byte is UTF-8 text without a
 * byte-order mark or a control character other than tab and line ends, no string escapes half of a UTF-16 surrogate
 * pair, and every line is blank (spaces and tabs only) or exactly one JSON object whose top-level keys are all
 * declared ({@link JsonLineShape}), or an object Spark's parser fails inside ({@link #brokenObject}: the reader gives
 * one corrupt record holding the line, which the line parse also marks corrupt whole). On such a file both read the
 * same lines with the same parser and options, so they give the same records; any other file is left to the line
 * parse. The reader reads declared decimals at their declared type, where the line parse reads them wide to see a
 * digit rounding would drop: so a value of a declared decimal must also have no nonzero digit beyond its scale
 * ({@link #decimalsFit}).
 *
 * <p>Lines are split at every CR and LF: a CRLF then yields an extra empty line, which both skip.
 */
public final class JsonFileProof {
  private static final int CHUNK = 1 << 22;
  // The parser Spark's JSON reader builds for a source without parser options (`json_reader.reader_applies`).
  private static final JsonFactory SPARK_FACTORY = sparkFactory();

  private JsonFileProof() {}

  /**
   * One count per path of the JSON array {@code pathsJson}, comma-separated: the records the file holds (its lines
   * that are not blank: one record each, read either way) when it reads alike, {@code -1} otherwise (also when it
   * cannot be read). {@code namesJson}: the declared names as a JSON array of strings; {@code decimalsJson}: the
   * declared decimals whose values must be exact, as a JSON object of name to scale. Files are checked in
   * parallel.
   */
  public static String alikeRecords(String pathsJson, String namesJson, String decimalsJson) throws IOException {
    return alikeRecords(pathsJson, namesJson, decimalsJson, CHUNK);
  }

  /** {@link #alikeRecords(String, String, String)} reading each file {@code chunk} bytes at a time (at least). */
  public static String alikeRecords(String pathsJson, String namesJson, String decimalsJson, int chunk)
      throws IOException {
    Set<String> declared = JsonLineShape.parseNames(namesJson);
    Map<String, Integer> decimals = parseScales(decimalsJson);
    List<String> paths = JsonLineShape.parseNameList(pathsJson);
    long[] out = new long[paths.size()];
    IntStream.range(0, out.length).parallel().forEach(i -> out[i] = records(paths.get(i), declared, decimals, chunk));
    StringBuilder text = new StringBuilder();
    for (long n : out) {
      text.append(text.length() == 0 ? "" : ",").append(n);
    }
    return text.toString();
  }

  /** The records of a file that reads alike, else -1. */
  static long records(String path, Set<String> declared, Map<String, Integer> decimals, int chunk) {
    long records = 0;
    byte[] buf = new byte[chunk];
    int start = 0;
    int filled = 0;
    boolean eof = false;
    StrictJsonObject strict = new StrictJsonObject(declared, decimals);
    try (InputStream in = Files.newInputStream(Paths.get(path))) {
      while (!eof) {
        if (start > 0) {
          System.arraycopy(buf, start, buf, 0, filled - start);
          filled -= start;
          start = 0;
        } else if (filled == buf.length) {
          buf = Arrays.copyOf(buf, buf.length * 2);
        }
        int n = in.read(buf, filled, buf.length - filled);
        if (n < 0) {
          eof = true;
        } else {
          filled += n;
        }
        for (int i = start; i < filled; i++) {
          int accepted = i == start ? strict.acceptedLineEnd(buf, start, filled) : -1;
          if (accepted >= 0) {
            i = accepted; // the common line, judged and ended in one pass
            start = i + 1;
            records++;
            continue;
          }
          if (buf[i] == '\n' || buf[i] == '\r') {
            int line = strict.accepts(buf, start, i) ? RECORD : lineAlike(buf, start, i, declared, decimals);
            if (line == UNLIKE) {
              return -1;
            }
            records += line;
            start = i + 1;
          }
        }
      }
      int last = strict.accepts(buf, start, filled) ? RECORD : lineAlike(buf, start, filled, declared, decimals);
      return last == UNLIKE ? -1 : records + last;
    } catch (IOException | RuntimeException unproven) {
      return -1; // unreadable, or beyond what the scan can judge: the line parse reads it
    }
  }

  // What a line is to both readers: read otherwise (UNLIKE), blank (no record) or one record.
  static final int UNLIKE = -1;
  static final int BLANK = 0;
  static final int RECORD = 1;

  /**
   * {@link #BLANK}, or {@link #RECORD} for one object of declared keys or a broken object, in the line {@code
   * buf[from, to)}; else {@link #UNLIKE}.
   */
  static int lineAlike(byte[] buf, int from, int to, Set<String> declared, Map<String, Integer> decimals)
      throws IOException {
    boolean blank = true;
    for (int i = from; i < to; i++) {
      int b = buf[i] & 0xff;
      if (b == ' ' || b == '\t') {
        continue;
      }
      blank = false;
      if (b < 0x20) {
        return UNLIKE;
      }
      if (b == '\\' && i + 3 < to && buf[i + 1] == 'u' && (buf[i + 2] | 0x20) == 'd' && surrogateDigit(buf[i + 3])) {
        return UNLIKE;
      }
      if (b >= 0x80) {
        int length = utf8Length(buf, i, to);
        if (length == 0 || (b == 0xef && (buf[i + 1] & 0xff) == 0xbb && (buf[i + 2] & 0xff) == 0xbf)) {
          return UNLIKE; // not UTF-8, or a byte-order mark
        }
        i += length - 1;
      }
    }
    if (blank) {
      return BLANK;
    }
    int shape;
    try (JsonParser parser = JsonLineShape.FACTORY.createParser(buf, from, to - from)) {
      shape = JsonLineShape.shape(parser, declared);
    }
    boolean alike =
        shape == JsonLineShape.DECLARED
            ? decimals.isEmpty() || decimalsFit(buf, from, to, decimals)
            : shape == JsonLineShape.NOT_ONE_OBJECT && brokenObject(buf, from, to);
    return alike ? RECORD : UNLIKE;
  }

  /**
   * Whether every top-level value of a declared decimal in the object {@code buf[from, to)} has no nonzero digit
   * beyond the decimal's scale: a number, or a string read as Spark reads a decimal in one (commas removed, then
   * {@code BigDecimal}); a value that is no decimal fails to convert at any type. The line is tokenized as
   * {@link JsonLineShape} tokenizes it, which reads every token Spark's parser reads (and goes on where Spark's
   * stops at a control character in a string): each value Spark could convert is tested.
   */
  static boolean decimalsFit(byte[] buf, int from, int to, Map<String, Integer> decimals) throws IOException {
    try (JsonParser parser = JsonLineShape.FACTORY.createParser(buf, from, to - from)) {
      if (parser.nextToken() != JsonToken.START_OBJECT) {
        return false;
      }
      while (parser.nextToken() == JsonToken.FIELD_NAME) {
        Integer scale = decimals.get(parser.currentName());
        JsonToken value = parser.nextToken();
        if (scale == null) {
          parser.skipChildren();
          continue;
        }
        BigDecimal number = null;
        try {
          if (value == JsonToken.VALUE_NUMBER_INT || value == JsonToken.VALUE_NUMBER_FLOAT) {
            number = parser.getDecimalValue();
          } else if (value == JsonToken.VALUE_STRING) {
            number = new BigDecimal(parser.getText().replace(",", ""));
          }
        } catch (NumberFormatException notDecimal) {
          number = null;
        }
        if (number != null && number.signum() != 0 && number.stripTrailingZeros().scale() > scale) {
          return false;
        }
        parser.skipChildren();
      }
      return true;
    } catch (JsonProcessingException unproven) {
      return false;
    }
  }

  /** A JSON object of names to integers. */
  static Map<String, Integer> parseScales(String json) throws IOException {
    Map<String, Integer> parsed = new HashMap<>();
    try (JsonParser parser = JsonLineShape.FACTORY.createParser(json)) {
      if (parser.nextToken() != JsonToken.START_OBJECT) {
        throw new IllegalArgumentException("decimals must be a JSON object of names to scales: " + json);
      }
      while (parser.nextToken() == JsonToken.FIELD_NAME) {
        String name = parser.currentName();
        parser.nextToken();
        parsed.put(name, parser.getIntValue());
      }
    }
    return parsed;
  }

  /**
   * Whether Spark's JSON reader fails inside the line's first object, so that it gives one corrupt record holding
   * the line: the line starts an object that Spark's own parser (built from the reader's default options) cannot
   * tokenize to its end. A successful conversion tokenizes the whole object, so a failure inside it always makes
   * the record corrupt. An object that ends is not broken: what follows it is what the reader would drop.
   */
  static boolean brokenObject(byte[] buf, int from, int to) throws IOException {
    try (JsonParser parser = SPARK_FACTORY.createParser(buf, from, to - from)) {
      if (parser.nextToken() != JsonToken.START_OBJECT) {
        return false;
      }
      parser.skipChildren();
      return false;
    } catch (JsonProcessingException broken) {
      return true;
    }
  }

  private static JsonFactory sparkFactory() {
    return new JSONOptions(noOptions(), "UTC", "").buildJsonFactory();
  }

  /** An empty options map for Spark's JSON classes. */
  @SuppressWarnings("unchecked")
  static scala.collection.immutable.Map<String, String> noOptions() {
    return (scala.collection.immutable.Map<String, String>) (Object) scala.collection.immutable.Map$.MODULE$.empty();
  }

  private static boolean surrogateDigit(byte b) {
    return (b >= '8' && b <= '9') || ((b | 0x20) >= 'a' && (b | 0x20) <= 'f');
  }

  /** The length of the well-formed UTF-8 sequence starting at {@code i} (lead byte 0x80 or more), 0 if none. */
  static int utf8Length(byte[] buf, int i, int to) {
    int b = buf[i] & 0xff;
    int length;
    int low = 0x80;
    int high = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) {
      length = 2;
    } else if (b >= 0xe0 && b <= 0xef) {
      length = 3;
      low = b == 0xe0 ? 0xa0 : 0x80;
      high = b == 0xed ? 0x9f : 0xbf;
    } else if (b >= 0xf0 && b <= 0xf4) {
      length = 4;
      low = b == 0xf0 ? 0x90 : 0x80;
      high = b == 0xf4 ? 0x8f : 0xbf;
    } else {
      return 0;
    }
    if (i + length > to) {
      return 0;
    }
    for (int k = 1; k < length; k++) {
      int c = buf[i + k] & 0xff;
      if (c < (k == 1 ? low : 0x80) || c > (k == 1 ? high : 0xbf)) {
        return 0;
      }
    }
    return length;
  }
}

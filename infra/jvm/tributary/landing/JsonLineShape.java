package tributary.landing;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonFactoryBuilder;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.spark.sql.api.java.UDF2;

/**
 * The shape of one landed JSON line, in one tokenizing pass: {@link #NOT_ONE_OBJECT} unless the line is exactly one
 * JSON object (nothing but white space after it), else {@link #DECLARED} when every top-level key is one of the
 * declared names, else {@link #UNDECLARED}. NULL for a NULL line.
 *
 * <p>The declared names come as a JSON array of strings (a literal: parsed again only when it changes). The parser
 * is built as Spark's own {@code json_object_keys} builds its parser (unescaped control characters and single quotes
 * allowed), so a line is judged as Spark's key listing would judge it. Values are skipped, never built.
 */
public class JsonLineShape implements UDF2<String, String, Integer> {
  public static final int NOT_ONE_OBJECT = 0;
  public static final int DECLARED = 1;
  public static final int UNDECLARED = 2;

  static final JsonFactory FACTORY =
      new JsonFactoryBuilder()
          .enable(JsonReadFeature.ALLOW_UNESCAPED_CONTROL_CHARS)
          .enable(JsonReadFeature.ALLOW_SINGLE_QUOTES)
          .build();

  private transient String declaredJson;
  private transient Set<String> declared;

  @Override
  public Integer call(String line, String names) throws IOException {
    if (line == null) {
      return null;
    }
    if (!names.equals(declaredJson)) {
      declared = parseNames(names);
      declaredJson = names;
    }
    try (JsonParser parser = FACTORY.createParser(line)) {
      return shape(parser, declared);
    }
  }

  /** The shape of the one line {@code parser} reads (see the class comment). */
  static int shape(JsonParser parser, Set<String> declared) {
    try {
      if (parser.nextToken() != JsonToken.START_OBJECT) {
        return NOT_ONE_OBJECT;
      }
      boolean undeclared = false;
      JsonToken token;
      while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
        undeclared |= !declared.contains(parser.currentName());
        parser.nextToken();
        parser.skipChildren();
      }
      if (token != JsonToken.END_OBJECT || parser.nextToken() != null) {
        return NOT_ONE_OBJECT;
      }
      return undeclared ? UNDECLARED : DECLARED;
    } catch (IOException notJson) {
      return NOT_ONE_OBJECT;
    }
  }

  static Set<String> parseNames(String names) throws IOException {
    return new HashSet<>(parseNameList(names));
  }

  /** The strings of a JSON array of strings, in order. */
  static List<String> parseNameList(String names) throws IOException {
    List<String> parsed = new ArrayList<>();
    try (JsonParser parser = FACTORY.createParser(names)) {
      if (parser.nextToken() != JsonToken.START_ARRAY) {
        throw new IllegalArgumentException("declared names must be a JSON array of strings: " + names);
      }
      while (parser.nextToken() == JsonToken.VALUE_STRING) {
        parsed.add(parser.getText());
      }
    }
    return parsed;
  }
}

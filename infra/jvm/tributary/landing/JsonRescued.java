package tributary.landing;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.api.java.UDF4;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.JsonToStructs;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Option;
import scala.collection.Seq;

/**
 * The {@code _rescued_data} of one landed JSON line: a JSON object of the declared fields whose typed value is
 * missing, with their text, then of every undeclared top-level key, with its text; NULL when it would be empty.
 *
 * <p>Arguments: the line; the declared names as a JSON array of strings (a literal); one character per declared
 * name, {@code 1} when its typed value is missing; per declared name, the exact text to keep instead of the line's
 * (a decimal's wide value) or NULL. The line's texts are Spark's own {@code from_json(line, 'map<string,string>')}
 * (the expression itself is evaluated), and the object is written as {@code to_json} writes a map, so the result is
 * the one those functions give; but as one function Spark compiles into the query, where they are interpreted and
 * keep every column of their projection out of whole-stage code generation.
 */
public class JsonRescued implements UDF4<String, String, String, Seq<String>, String> {
  private static final JsonFactory OUT = new JsonFactory();

  private transient String namesJson;
  private transient List<String> names;
  private transient Set<String> declared;
  private transient JsonToStructs texts;

  @Override
  public String call(String line, String namesArg, String missing, Seq<String> exact) throws IOException {
    if (line == null) {
      return null;
    }
    if (!namesArg.equals(namesJson)) {
      declared = JsonLineShape.parseNames(namesArg);
      names = new ArrayList<>(JsonLineShape.parseNameList(namesArg));
      namesJson = namesArg;
    }
    Map<String, String> found = lineTexts(line);
    StringWriter out = new StringWriter();
    int entries = 0;
    try (JsonGenerator gen = OUT.createGenerator(out)) {
      gen.writeStartObject();
      for (int i = 0; i < names.size(); i++) {
        if (missing.charAt(i) != '1') {
          continue;
        }
        String text = exact.apply(i) != null ? exact.apply(i) : found.get(names.get(i));
        if (text != null) {
          gen.writeStringField(names.get(i), text);
          entries++;
        }
      }
      for (Map.Entry<String, String> entry : found.entrySet()) {
        if (!declared.contains(entry.getKey())) {
          gen.writeFieldName(entry.getKey());
          if (entry.getValue() == null) {
            gen.writeNull();
          } else {
            gen.writeString(entry.getValue());
          }
          entries++;
        }
      }
      gen.writeEndObject();
    }
    return entries == 0 ? null : out.toString();
  }

  /** Each top-level key's text, in line order, as {@code from_json(line, 'map<string,string>')} gives them. */
  private Map<String, String> lineTexts(String line) {
    if (texts == null) {
      texts =
          new JsonToStructs(
              DataTypes.createMapType(DataTypes.StringType, DataTypes.StringType),
              JsonFileProof.noOptions(),
              new BoundReference(0, DataTypes.StringType, true),
              Option.apply("UTC"),
              JsonToStructs.$lessinit$greater$default$5());
    }
    InternalRow row = new GenericInternalRow(new Object[] {UTF8String.fromString(line)});
    MapData map = (MapData) texts.eval(row);
    Map<String, String> found = new LinkedHashMap<>();
    if (map == null) {
      return found;
    }
    ArrayData keys = map.keyArray();
    ArrayData values = map.valueArray();
    for (int i = 0; i < map.numElements(); i++) {
      found.put(keys.getUTF8String(i).toString(), values.isNullAt(i) ? null : values.getUTF8String(i).toString());
    }
    return found;
  }
}

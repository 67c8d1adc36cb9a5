package tributary.landing;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.api.java.UDF4;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.CsvToStructs;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Option;
import scala.Tuple2;
import scala.collection.Seq;

/**
 * The {@code _rescued_data} of one record Spark's CSV reader read from a file of one header layout: a JSON object
 * of the declared columns whose typed value is missing, with their text in the record's line, then of every column
 * the schema does not declare, with the reader's value; NULL when it would be empty.
 *
 * <p>Arguments: the record's line, or NULL when it was not malformed (then no declared column is rescued); the
 * layout as a JSON object literal ({@code names}: the header's columns in file order, {@code declared}: the declared
 * ones among them in schema order, {@code options}: the CSV options); one character per declared column, {@code 1}
 * when its typed value is missing; the undeclared columns' values, in file order. The line's texts are Spark's own
 * {@code from_csv(line, <every column as string>, options)} (the expression itself is evaluated) and the object is
 * written as {@code to_json} writes a map: the result those functions give, but compiled into the query, where they
 * are interpreted and keep every column of their projection out of whole-stage code generation.
 */
public class CsvRescued implements UDF4<String, String, String, Seq<String>, String> {
  private static final JsonFactory OUT = new JsonFactory();

  private transient String layoutJson;
  private transient List<String> declared;
  private transient List<String> undeclared;
  private transient Map<String, Integer> position;
  private transient CsvToStructs texts;

  @Override
  public String call(String line, String layout, String missing, Seq<String> extra) throws IOException {
    if (!layout.equals(layoutJson)) {
      parseLayout(layout);
      layoutJson = layout;
    }
    InternalRow found = line == null ? null : (InternalRow) texts.eval(new GenericInternalRow(new Object[] {
        UTF8String.fromString(line)}));
    StringWriter out = new StringWriter();
    int entries = 0;
    try (JsonGenerator gen = OUT.createGenerator(out)) {
      gen.writeStartObject();
      if (found != null) {
        for (int i = 0; i < declared.size(); i++) {
          int at = position.get(declared.get(i));
          if (missing.charAt(i) == '1' && !found.isNullAt(at)) {
            gen.writeStringField(declared.get(i), found.getUTF8String(at).toString());
            entries++;
          }
        }
      }
      for (int i = 0; i < undeclared.size(); i++) {
        gen.writeFieldName(undeclared.get(i));
        String value = extra.apply(i);
        if (value == null) {
          gen.writeNull();
        } else {
          gen.writeString(value);
        }
        entries++;
      }
      gen.writeEndObject();
    }
    return entries == 0 ? null : out.toString();
  }

  private void parseLayout(String layout) throws IOException {
    List<String> names = new ArrayList<>();
    declared = new ArrayList<>();
    scala.collection.immutable.Map<String, String> options = JsonFileProof.noOptions();
    try (JsonParser parser = JsonLineShape.FACTORY.createParser(layout)) {
      parser.nextToken(); // the object
      while (parser.nextToken() == JsonToken.FIELD_NAME) {
        String key = parser.currentName();
        parser.nextToken();
        if (key.equals("options")) {
          while (parser.nextToken() == JsonToken.FIELD_NAME) {
            String option = parser.currentName();
            parser.nextToken();
            options = options.$plus(new Tuple2<>(option, parser.getText()));
          }
        } else {
          List<String> list = key.equals("names") ? names : declared;
          while (parser.nextToken() == JsonToken.VALUE_STRING) {
            list.add(parser.getText());
          }
        }
      }
    }
    position = new HashMap<>();
    List<StructField> fields = new ArrayList<>();
    for (String name : names) {
      position.put(name, fields.size());
      fields.add(DataTypes.createStructField(name, DataTypes.StringType, true));
    }
    String corrupt = options.get("columnNameOfCorruptRecord").getOrElse(() -> "_corrupt_record");
    fields.add(DataTypes.createStructField(corrupt, DataTypes.StringType, true));
    undeclared = new ArrayList<>(names);
    undeclared.removeAll(declared);
    StructType schema = DataTypes.createStructType(fields);
    texts =
        new CsvToStructs(
            schema, options, new BoundReference(0, DataTypes.StringType, true), Option.apply("UTC"), Option.empty());
  }
}

package tributary.landing;

import org.apache.spark.rdd.InputFileBlockHolder;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The path of the file the current row is read from, as Spark's {@code _metadata.file_path} gives it (the same
 * URL-encoded URI the scan records for {@code input_file_name()}).
 *
 * <p>Why not {@code _metadata.file_path}: for a row-based reader (CSV, JSON) Spark appends the metadata by copying
 * every row once more (a projection over the row joined with the metadata), 10-20 % of a wide CSV read. Why not
 * {@code input_file_name()}: it is nondeterministic, and Spark refuses a MERGE whose source holds one. This
 * function reads the same per-task value as {@code input_file_name()}, registered as deterministic: it must only be
 * applied in a projection directly over a file scan (nothing between them that moves rows across tasks), where the
 * value is fixed by the row's file. That value is the URI as the scan holds it; a local file's is written as
 * {@code _metadata.file_path} writes it ({@code file:/...}, not {@code file:///...}), once per file.
 *
 * <p>The argument is ignored: a function of no column would count as a constant and be folded on the driver, where
 * no file is being read. Pass any non-constant column of the scan.
 */
public class LandedFilePath implements UDF1<Object, UTF8String> {
  /** The scan's value for a file and the path written for it (one object: tasks may share the function). */
  private record Written(UTF8String scanned, UTF8String path) {}

  private transient Written last;

  @Override
  public UTF8String call(Object ignored) {
    UTF8String scanned = InputFileBlockHolder.getInputFilePath();
    Written known = last;
    if (known == null || known.scanned() != scanned) { // the scan's value is one object per file
      String uri = scanned.toString();
      UTF8String path = uri.startsWith("file:///") ? UTF8String.fromString("file:/" + uri.substring(8)) : scanned;
      known = new Written(scanned, path);
      last = known;
    }
    return known.path();
  }
}

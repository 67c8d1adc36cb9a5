package tributary.write;

import java.util.Map;
import org.apache.iceberg.spark.CommitMetadata;
import org.apache.spark.sql.MergeIntoWriter;

/**
 * A MERGE whose Iceberg commit carries extra snapshot-summary properties.
 *
 * <p>Why here: a DataFrame or SQL MERGE takes no write options, so {@code snapshot-property.*} cannot reach its
 * commit. Iceberg attaches the properties of {@link CommitMetadata#withCommitProperties} to every snapshot committed
 * by the calling thread while its callable runs; the MERGE runs and commits in that thread.
 */
public final class CommitProperties {
  private CommitProperties() {}

  /** Run {@code writer.merge()} with {@code properties} in the summary of the snapshot it commits. */
  public static void merge(MergeIntoWriter<?> writer, Map<String, String> properties) {
    CommitMetadata.withCommitProperties(
        properties,
        () -> {
          writer.merge();
          return null;
        },
        RuntimeException.class);
  }
}

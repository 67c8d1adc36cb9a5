package tributary.landing;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.List;
import java.util.stream.IntStream;

/**
 * Whether Spark's CSV reader reads a landed CSV file exactly as Tributary's line parse does, decided from the file's
 * bytes on the driver before a batch is read ({@code pipelines/io/csv_reader.py} says what each test guards). A file
 * qualifies when it starts with the header line the run read (after an optional byte-order mark), alone on its line;
 * every byte is UTF-8 text; no control character occurs but tab and line ends; and after that first header neither a
 * byte-order mark nor a line starting with the header occurs. One pass over each file, files in parallel.
 */
public final class CsvFileProof {
  private static final int CHUNK = 1 << 22;
  private static final byte[] BOM = {(byte) 0xEF, (byte) 0xBB, (byte) 0xBF};
  // The control characters the reader's blank-line test trims: every byte below a space but tab, LF and CR.
  private static final boolean[] CONTROL = new boolean[0x20];

  static {
    for (int b = 0; b < CONTROL.length; b++) {
      CONTROL[b] = b != '\t' && b != '\n' && b != '\r';
    }
  }

  private CsvFileProof() {}

  /**
   * One character per path of the JSON array {@code pathsJson}: {@code 1} when the file reads alike with the header
   * line of the same index in the JSON array {@code headersJson}, {@code 0} otherwise (also when it cannot be read).
   */
  public static String readsAlike(String pathsJson, String headersJson) throws IOException {
    return readsAlike(pathsJson, headersJson, CHUNK);
  }

  /** {@link #readsAlike(String, String)} reading each file {@code chunk} bytes at a time. */
  public static String readsAlike(String pathsJson, String headersJson, int chunk) throws IOException {
    List<String> paths = JsonLineShape.parseNameList(pathsJson);
    List<String> headers = JsonLineShape.parseNameList(headersJson);
    if (paths.size() != headers.size()) {
      throw new IllegalArgumentException("one header line per path is needed");
    }
    char[] out = new char[paths.size()];
    IntStream.range(0, out.length)
        .parallel()
        .forEach(i -> out[i] = alike(paths.get(i), headers.get(i).getBytes(StandardCharsets.UTF_8), chunk) ? '1' : '0');
    return new String(out);
  }

  static boolean alike(String path, byte[] header, int chunk) {
    if (header.length == 0) {
      return false;
    }
    try (InputStream in = Files.newInputStream(Paths.get(path))) {
      byte[] start = in.readNBytes(BOM.length + header.length + 1);
      int at = startsWith(start, 0, BOM) ? BOM.length : 0;
      int end = at + header.length;
      if (!startsWith(start, at, header) || (start.length > end && start[end] != '\n' && start[end] != '\r')) {
        return false; // not its header first, alone on its line
      }
      Scan scan = new Scan(header);
      if (!scan.clean(start, 0, end)) {
        return false;
      }
      scan.body = true;
      if (!scan.clean(start, end, start.length)) {
        return false;
      }
      byte[] buf = new byte[Math.max(chunk, 1)];
      int read;
      while ((read = in.readNBytes(buf, 0, buf.length)) > 0) {
        if (!scan.clean(buf, 0, read)) {
          return false;
        }
      }
      return scan.complete();
    } catch (IOException | RuntimeException unproven) {
      return false; // unreadable: the line parse reads it and says why
    }
  }

  /**
   * One pass over a file's bytes, which may come in pieces: UTF-8 checked as Python's strict decoder checks it (no
   * overlong form, no surrogate, nothing above U+10FFFF), no control character (see {@link #CONTROL}), and in the
   * {@link #body} (after the first header) no byte-order mark and no line that starts with the header (a line equal
   * to it is dropped by the line parse and read as a record by the reader; the start is enough, and cheap).
   */
  static final class Scan {
    private final byte[] header;
    boolean body;
    private int pending; // continuation bytes still owed
    private int low = 0x80; // the range of the next continuation byte
    private int high = 0xBF;
    private int bom; // bytes of a byte-order mark seen so far
    private int matched = -1; // bytes of the header matched at the start of this line, -1 when not at a line start

    Scan(byte[] header) {
      this.header = header;
    }

    boolean clean(byte[] bytes, int from, int to) {
      for (int i = from; i < to; i++) {
        int b = bytes[i];
        if (matched >= 0 && body) {
          if (b == header[matched]) {
            if (++matched == header.length) {
              return false;
            }
          } else {
            matched = -1;
          }
        }
        if (pending == 0) {
          if (b >= 0x20) {
            continue; // printable ASCII (and DEL)
          }
          if (b >= 0) {
            if (b == '\n' || b == '\r') {
              matched = 0;
            } else if (CONTROL[b]) {
              return false;
            }
            continue;
          }
          int lead = b & 0xFF;
          if (lead < 0xC2 || lead > 0xF4) {
            return false;
          }
          pending = lead < 0xE0 ? 1 : lead < 0xF0 ? 2 : 3;
          low = lead == 0xE0 ? 0xA0 : lead == 0xF0 ? 0x90 : 0x80;
          high = lead == 0xED ? 0x9F : lead == 0xF4 ? 0x8F : 0xBF;
          bom = lead == 0xEF ? 1 : 0;
        } else {
          int next = b & 0xFF;
          if (next < low || next > high) {
            return false;
          }
          low = 0x80;
          high = 0xBF;
          pending--;
          bom = bom == 1 && next == 0xBB ? 2 : bom == 2 && next == 0xBF ? 3 : 0;
          if (bom == 3 && body) {
            return false;
          }
        }
      }
      return true;
    }

    boolean complete() {
      return pending == 0;
    }
  }

  static boolean startsWith(byte[] bytes, int at, byte[] prefix) {
    return bytes.length - at >= prefix.length
        && Arrays.equals(bytes, at, at + prefix.length, prefix, 0, prefix.length);
  }
}

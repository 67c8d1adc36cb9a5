package tributary.landing;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Collection;

/**
 * The fast test {@link JsonFileProof} asks of a line first: one strict (RFC 8259) JSON object whose top-level keys,
 * written without escapes, are all declared, with well-formed UTF-8 and no control character in its strings, no
 * escape of half a surrogate pair, nesting, numbers and strings far below every parser limit. Every parser
 * configuration involved (Spark's reader, {@code from_json}, {@link JsonLineShape}) reads such a line as the same one
 * object, so it is alike; a line this test refuses is judged by Jackson instead. Not thread-safe: one per file scan.
 */
final class StrictJsonObject {
  private static final int MAX_DEPTH = 64;
  private static final int MAX_NUMBER = 100;
  private static final int MAX_STRING = 1 << 20;

  // Bytes a string holds as they are: printable ASCII but the quote and the backslash.
  private static final boolean[] PLAIN = new boolean[256];

  static {
    for (int b = 0x20; b < 0x80; b++) {
      PLAIN[b] = b != '"' && b != '\\';
    }
  }

  private final byte[][] names;
  private byte[] buf;
  private int pos;
  private int end;
  private boolean escaped;

  StrictJsonObject(Collection<String> declared) {
    names = declared.stream().map(n -> n.getBytes(StandardCharsets.UTF_8)).toArray(byte[][]::new);
  }

  /** Whether {@code line[from, to)} is such an object (see the class comment). */
  boolean accepts(byte[] line, int from, int to) {
    buf = line;
    pos = from;
    end = to;
    skipSpace();
    if (!at('{') || !object(1, true)) {
      return false;
    }
    skipSpace();
    return pos == end;
  }

  /** After a key: the colon, the value and the white space after it. */
  private boolean member(int depth) {
    skipSpace();
    if (!at(':')) {
      return false;
    }
    pos++;
    skipSpace();
    if (!value(depth)) {
      return false;
    }
    skipSpace();
    return true;
  }

  private boolean value(int depth) {
    if (pos >= end) {
      return false;
    }
    switch (buf[pos]) {
      case '"':
        return string();
      case '{':
        return depth < MAX_DEPTH && object(depth + 1, false);
      case '[':
        return depth < MAX_DEPTH && array(depth + 1);
      case 't':
        return word("true");
      case 'f':
        return word("false");
      case 'n':
        return word("null");
      default:
        return number();
    }
  }

  /** An object from its opening brace; with {@code declaredKeys}, each key is one of the declared names, unescaped. */
  private boolean object(int depth, boolean declaredKeys) {
    pos++;
    skipSpace();
    if (at('}')) {
      pos++;
      return true;
    }
    while (true) {
      int key = pos + 1;
      if (!at('"') || !string() || (declaredKeys && (escaped || !declared(key, pos - 1))) || !member(depth)) {
        return false;
      }
      if (at('}')) {
        pos++;
        return true;
      }
      if (!at(',')) {
        return false;
      }
      pos++;
      skipSpace();
    }
  }

  private boolean array(int depth) {
    pos++;
    skipSpace();
    if (at(']')) {
      pos++;
      return true;
    }
    while (true) {
      if (!value(depth)) {
        return false;
      }
      skipSpace();
      if (at(']')) {
        pos++;
        return true;
      }
      if (!at(',')) {
        return false;
      }
      pos++;
      skipSpace();
    }
  }

  /** A string from its opening quote; {@link #escaped} says whether it held an escape. */
  private boolean string() {
    int start = ++pos;
    int limit = Math.min(end, start + MAX_STRING);
    escaped = false;
    while (true) {
      while (pos < limit && PLAIN[buf[pos] & 0xff]) {
        pos++;
      }
      if (pos >= limit) {
        return false;
      }
      int c = buf[pos] & 0xff;
      if (c == '"') {
        pos++;
        return true;
      }
      if (c == '\\') {
        escaped = true;
        if (pos + 1 >= end) {
          return false;
        }
        byte e = buf[pos + 1];
        if (e == 'u') {
          if (pos + 5 >= end || !hex(pos + 2, 4) || surrogate(pos + 2)) {
            return false;
          }
          pos += 6;
        } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
          pos += 2;
        } else {
          return false;
        }
      } else if (c < 0x20) {
        return false;
      } else {
        int length = JsonFileProof.utf8Length(buf, pos, end);
        if (length == 0) {
          return false;
        }
        pos += length;
      }
    }
  }

  private boolean number() {
    int start = pos;
    if (at('-')) {
      pos++;
    }
    if (at('0')) {
      pos++;
    } else if (digits() == 0) {
      return false;
    }
    if (at('.')) {
      pos++;
      if (digits() == 0) {
        return false;
      }
    }
    if (at('e') || at('E')) {
      pos++;
      if (at('+') || at('-')) {
        pos++;
      }
      if (digits() == 0) {
        return false;
      }
    }
    return pos - start <= MAX_NUMBER;
  }

  private int digits() {
    int start = pos;
    while (pos < end && buf[pos] >= '0' && buf[pos] <= '9') {
      pos++;
    }
    return pos - start;
  }

  private boolean word(String word) {
    if (pos + word.length() > end) {
      return false;
    }
    for (int i = 0; i < word.length(); i++) {
      if (buf[pos + i] != word.charAt(i)) {
        return false;
      }
    }
    pos += word.length();
    return true;
  }

  private boolean hex(int from, int count) {
    for (int i = from; i < from + count; i++) {
      byte c = buf[i];
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
        return false;
      }
    }
    return true;
  }

  /** Whether the four hex digits at {@code from} are D800-DFFF. */
  private boolean surrogate(int from) {
    int second = buf[from + 1] | 0x20;
    return (buf[from] | 0x20) == 'd' && (second >= '8' && second <= '9' || second >= 'a' && second <= 'f');
  }

  private boolean declared(int from, int to) {
    for (byte[] name : names) {
      if (name.length == to - from && Arrays.equals(name, 0, name.length, buf, from, to)) {
        return true;
      }
    }
    return false;
  }

  private boolean at(char c) {
    return pos < end && buf[pos] == c;
  }

  private void skipSpace() {
    while (pos < end && (buf[pos] == ' ' || buf[pos] == '\t')) {
      pos++;
    }
  }
}

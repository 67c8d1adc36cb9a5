package tributary.landing;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Collection;
import java.util.Map;

/**
 * The fast test {@link JsonFileProof} asks of a line first: one strict (RFC 8259) JSON object whose top-level keys,
 * written without escapes, are all declared, with well-formed UTF-8 and no control character in its strings, no
 * escape of half a surrogate pair, nesting, numbers and strings far below every parser limit. Every parser
 * configuration involved (Spark's reader, {@code from_json}, {@link JsonLineShape}) reads such a line as the same one
 * object, so it is alike; a line this test refuses is judged by Jackson instead. A declared decimal's value must
 * also be null or a number without an exponent and with no nonzero digit beyond the decimal's scale (Spark's reader
 * reads it at the declared type, and would round it). Not thread-safe: one per file scan.
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
  // Per name: the scale its values must fit (a declared decimal), else -1.
  private final int[] scales;
  private byte[] buf;
  private int pos;
  private int end;
  private boolean escaped;
  // The declared name most likely to come next (`declared`).
  private int next;

  StrictJsonObject(Collection<String> declared, Map<String, Integer> decimals) {
    names = declared.stream().map(n -> n.getBytes(StandardCharsets.UTF_8)).toArray(byte[][]::new);
    scales = declared.stream().mapToInt(n -> decimals.getOrDefault(n, -1)).toArray();
  }

  /** Whether {@code line[from, to)} is such an object (see the class comment). */
  boolean accepts(byte[] line, int from, int to) {
    return objectEnd(line, from, to) == to;
  }

  /**
   * The position of the CR or LF that ends the line starting at {@code from} when that line is such an object, else
   * -1 (not such an object, or no line end before {@code to}). One pass finds the line's end and judges it: no byte
   * this test accepts inside an object is a CR or LF, so the object it reads ends before the line does, and where it
   * accepts {@code buf[from, p)} followed by a line end at {@code p}, {@link #accepts} accepts the line {@code [from,
   * p)} too.
   */
  int acceptedLineEnd(byte[] line, int from, int to) {
    int at = objectEnd(line, from, to);
    return at >= 0 && at < to && (line[at] == '\n' || line[at] == '\r') ? at : -1;
  }

  /** Where the white space after such an object starting at {@code from} ends, or -1 when there is none. */
  private int objectEnd(byte[] line, int from, int to) {
    buf = line;
    pos = from;
    end = to;
    skipSpace();
    if (!at('{') || !object(1, true)) {
      return -1;
    }
    skipSpace();
    return pos;
  }

  /** After a key: the colon, the value (fitting {@code scale} unless it is -1) and the white space after it. */
  private boolean member(int depth, int scale) {
    skipSpace();
    if (!at(':')) {
      return false;
    }
    pos++;
    skipSpace();
    int start = pos;
    if (!value(depth) || (scale >= 0 && !fits(start, pos, scale))) {
      return false;
    }
    skipSpace();
    return true;
  }

  /** Whether the value {@code buf[from, to)} is null or a number with no nonzero digit beyond {@code scale}. */
  private boolean fits(int from, int to, int scale) {
    if (buf[from] == 'n') {
      return true;
    }
    int point = -1;
    int last = -1;  // the last nonzero digit after the point
    for (int i = from; i < to; i++) {
      byte b = buf[i];
      if (b == '.') {
        point = i;
      } else if (b == 'e' || b == 'E' || b == '"') {
        return false;  // an exponent or a string: left to Jackson
      } else if (point >= 0 && b != '0') {
        last = i;
      }
    }
    return point < 0 || last - point <= scale;
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
      if (!at('"') || !string()) {
        return false;
      }
      int index = declaredKeys ? (escaped ? -1 : declared(key, pos - 1)) : -2;
      if (index == -1 || !member(depth, index >= 0 ? scales[index] : -1)) {
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

  /** The index of the declared name {@code buf[from, to)}, else -1. */
  private int declared(int from, int to) {
    // Producers mostly write keys in one order: the name after the last one found is tried first.
    int guess = next < names.length ? next : 0;
    if (isName(guess, from, to)) {
      next = guess + 1;
      return guess;
    }
    for (int i = 0; i < names.length; i++) {
      if (isName(i, from, to)) {
        next = i + 1;
        return i;
      }
    }
    return -1;
  }

  private boolean isName(int index, int from, int to) {
    byte[] name = names[index];
    return name.length == to - from && Arrays.equals(name, 0, name.length, buf, from, to);
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

package tributary.sql;

/** A statement the read-only SQL endpoint refuses; its text is the whole message clients see. */
public final class ReadOnlyViolation extends SecurityException {
  private static final long serialVersionUID = 1L;

  public ReadOnlyViolation(String message) {
    super(message);
  }

  /** Just the message: the Thrift Server reports errors as "Error running query: " + toString(). */
  @Override
  public String toString() {
    return getMessage();
  }
}

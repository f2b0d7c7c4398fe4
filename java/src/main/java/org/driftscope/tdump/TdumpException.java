package org.driftscope.tdump;

/**
 * The one exception type of this library: a stable {@link ErrorCode}, a one-line message that
 * names the field, the value and the allowed range (text from the file escaped as the C++
 * library escapes it), and the file offset where that applies. The message is exactly the C++
 * {@code Error::message}, " (at offset N)" included.
 */
public class TdumpException extends Exception {
  private static final long serialVersionUID = 1L;

  /** {@link #offset()} when the error refers to no file offset. */
  public static final long NO_OFFSET = -1L;

  private final ErrorCode code;
  private final long offset;

  TdumpException(ErrorCode code, String message, long offset, Throwable cause) {
    super(message, cause);
    this.code = code;
    this.offset = offset;
  }

  /** Builds the error as C++ make_error does: escaped text, then " (at offset N)". */
  static TdumpException make(ErrorCode code, String message, long offset) {
    return make(code, message, offset, null);
  }

  static TdumpException make(ErrorCode code, String message, long offset, Throwable cause) {
    String m = Text.printable(message);
    if (offset != NO_OFFSET) m = m + " (at offset " + Long.toUnsignedString(offset) + ")";
    return new TdumpException(code, m, offset, cause);
  }

  static TdumpException make(ErrorCode code, String message) {
    return make(code, message, NO_OFFSET, null);
  }

  /** The same error with its message prefixed (a file name), offset kept. */
  TdumpException prefixed(String prefix) {
    return new TdumpException(code, prefix + getMessage(), offset, getCause());
  }

  public ErrorCode code() {
    return code;
  }

  /** File offset the error refers to, or {@link #NO_OFFSET}. */
  public long offset() {
    return offset;
  }

  /** The message without the " (at offset N)" suffix. */
  String bareMessage() {
    String m = getMessage();
    if (offset == NO_OFFSET) return m;
    String tail = " (at offset " + Long.toUnsignedString(offset) + ")";
    return m.endsWith(tail) ? m.substring(0, m.length() - tail.length()) : m;
  }

  /** "code: message", as C++ {@code Error::to_string}. */
  @Override
  public String toString() {
    return code.codeName() + ": " + getMessage();
  }
}

package org.driftscope.tdump;

/**
 * The stable error codes of driftscope (include/driftscope/error.hpp): the same numbers and
 * snake_case names as the C++ library, the C ABI and the Python exceptions.
 */
public enum ErrorCode {
  INVALID_ARGUMENT(1), IO_ERROR(2), NOT_FOUND(3), FILTER_SYNTAX(4), UNSUPPORTED(5), CLOSED(6),
  TRUNCATED_HEADER(20), BAD_MAGIC(21), UNSUPPORTED_VERSION(22), BAD_BYTE_ORDER(23),
  UNSUPPORTED_FEATURE(24), BAD_HEADER_CHECKSUM(25),
  BAD_RECORD_MAGIC(40), BAD_FRAME_CHECKSUM(41), BAD_RECORD_CHECKSUM(42), SALT_MISMATCH(43),
  UNKNOWN_RECORD_KIND(44), RECORD_AFTER_END(45), BAD_INDEX(46),
  RESERVED_NONZERO(60), NONZERO_PADDING(61), LENGTH_MISMATCH(62), LIMIT_EXCEEDED(63),
  SHAPE_OVERFLOW(64), BAD_DTYPE(65), BAD_ENUM(66), BAD_ENCODING(67), BAD_VALUE(68), BAD_UTF8(69),
  EMPTY_NAME(70), DUPLICATE_KEY(71), BAD_AXES(72), DUPLICATE_TENSOR(73);

  private final int value;

  ErrorCode(int value) {
    this.value = value;
  }

  /** The numeric code (stable; the C ABI returns its negation). */
  public int value() {
    return value;
  }

  /** The stable snake_case name, e.g. {@code bad_magic}. */
  public String codeName() {
    return name().toLowerCase(java.util.Locale.ROOT);
  }

  /** The code of a snake_case name, or null. */
  public static ErrorCode fromName(String name) {
    for (ErrorCode c : values()) {
      if (c.codeName().equals(name)) return c;
    }
    return null;
  }
}

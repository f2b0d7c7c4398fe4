package org.driftscope.tdump;

/** The element types of docs/format.md §3.3.1, with their on-disk codes and sizes. */
public enum DType {
  F64(1, "f64", 8, true, false),
  F32(2, "f32", 4, true, false),
  /** IEEE binary16, stored as raw bits. */
  F16(3, "f16", 2, true, false),
  /** The upper 16 bits of a binary32, stored as raw bits. */
  BF16(4, "bf16", 2, true, false),
  /** OCP FP8 E4M3 (no infinities, S.1111.111 is NaN, bias 7), stored as raw bits. */
  F8E4M3FN(5, "f8e4m3fn", 1, true, false),
  /** OCP FP8 E5M2 (IEEE-like, bias 15), stored as raw bits. */
  F8E5M2(6, "f8e5m2", 1, true, false),
  I64(7, "i64", 8, false, true),
  I32(8, "i32", 4, false, true),
  I16(9, "i16", 2, false, true),
  I8(10, "i8", 1, false, true),
  U8(11, "u8", 1, false, true),
  /** One byte per element, 0 or 1. */
  BOOL(12, "bool", 1, false, false),
  U16(13, "u16", 2, false, true),
  U32(14, "u32", 4, false, true),
  U64(15, "u64", 8, false, true);

  private final int code;
  private final String text;
  private final int size;
  private final boolean isFloat;
  private final boolean isInteger;

  DType(int code, String text, int size, boolean isFloat, boolean isInteger) {
    this.code = code;
    this.text = text;
    this.size = size;
    this.isFloat = isFloat;
    this.isInteger = isInteger;
  }

  public int code() {
    return code;
  }

  /** Bytes per element. */
  public int size() {
    return size;
  }

  public boolean isFloat() {
    return isFloat;
  }

  /** Integer types (i8 … u64, not bool): the ones an affine encoding may use. */
  public boolean isInteger() {
    return isInteger;
  }

  /** The canonical name of the spec ("f32", "bf16", "bool"). */
  @Override
  public String toString() {
    return text;
  }

  private static final DType[] BY_CODE = values();

  /** The dtype of an on-disk code, or null when the code is not defined. */
  public static DType fromCode(int code) {
    return code >= 1 && code <= BY_CODE.length ? BY_CODE[code - 1] : null;
  }

  private static final String[][] ALIASES = {
    {"float64", "f64"}, {"double", "f64"}, {"float32", "f32"}, {"float", "f32"},
    {"float16", "f16"}, {"half", "f16"}, {"bfloat16", "bf16"}, {"float8_e4m3fn", "f8e4m3fn"},
    {"float8_e5m2", "f8e5m2"}, {"int64", "i64"}, {"int32", "i32"}, {"int16", "i16"},
    {"int8", "i8"}, {"uint8", "u8"}, {"uint16", "u16"}, {"uint32", "u32"}, {"uint64", "u64"},
    {"bool_", "bool"}, {"boolean", "bool"},
  };

  /** A canonical name or an alias (float32, half, bfloat16, int8, …), as the filters accept; null if unknown. */
  public static DType parse(String name) {
    for (DType t : BY_CODE) {
      if (t.text.equals(name)) return t;
    }
    for (String[] a : ALIASES) {
      if (a[0].equals(name)) return parse(a[1]);
    }
    return null;
  }
}

package org.driftscope.tdump;

/** The limits of docs/format.md §6, enforced alike by the writer and the reader. */
public final class Limits {
  private Limits() {}

  public static final int MAX_HEADER_LENGTH = 1 << 20;
  public static final int MAX_METADATA_ENTRIES = 1024;
  public static final int MAX_KEY_LENGTH = 256;
  public static final int MAX_VALUE_LENGTH = 65536;
  public static final int MAX_META_LENGTH = 1 << 20;
  public static final int MAX_NAME_LENGTH = 4096;
  public static final int MAX_OP_TYPE_LENGTH = 256;
  public static final int MAX_AXES_LENGTH = 1024;
  public static final int MAX_ATTRIBUTES = 256;
  public static final int MAX_RANK = 16;
  public static final long MAX_PAYLOAD_LENGTH = 1L << 48;
  public static final int MAX_PROJECTION_DIM = 4096;
  public static final long MAX_INDEX_ENTRIES = 0xFFFFFFFFL;
}

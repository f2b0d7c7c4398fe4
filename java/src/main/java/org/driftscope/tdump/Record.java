package org.driftscope.tdump;

import java.nio.ByteBuffer;

/** A TENSOR or SUMMARY record found by {@link TdumpReader}. */
public final class Record {
  /** The record kinds a reader returns (INDEX, END and private records are not listed). */
  public enum Kind {
    TENSOR, SUMMARY;

    @Override
    public String toString() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  Kind kind;
  long offset;
  long size;
  long payloadOffset;
  long payloadLength;
  TensorInfo info;
  Summary summary;
  Source source;

  public Kind kind() {
    return kind;
  }

  /** File offset of the record's frame. */
  public long offset() {
    return offset;
  }

  /** record_length: frame to end of padding. */
  public long size() {
    return size;
  }

  /** File offset of the payload (a multiple of 64). */
  public long payloadOffset() {
    return payloadOffset;
  }

  public long payloadLength() {
    return payloadLength;
  }

  /** The descriptor, with the exec_index and occurrence stored in the file. */
  public TensorInfo info() {
    return info.copy();
  }

  public String name() {
    return info.name();
  }

  /** The summary of a SUMMARY record, null for a TENSOR record. */
  public Summary summary() {
    return summary;
  }

  /**
   * The payload in place: a read-only little-endian view into the memory-mapped file (no copy).
   * Valid while the reader is reachable; a payload over 2^31 − 1 bytes is {@code unsupported}.
   */
  public ByteBuffer payload() throws TdumpException {
    return source.view(payloadOffset, payloadLength);
  }

  @Override
  public String toString() {
    return kind + " " + info + " at " + offset;
  }
}

package org.driftscope.tdump;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.util.zip.CRC32;

/**
 * Read-only bytes of a file: memory-mapped in 1 GiB segments (a MappedByteBuffer holds at most
 * 2^31 − 1 bytes), or a heap buffer. Every accessor takes a u64 offset already checked against
 * {@link #size()} by the caller.
 */
final class Source {
  private static final int SHIFT = 30;
  private static final long SEG = 1L << SHIFT;

  private final ByteBuffer[] segs;
  private final long size;
  private final FileChannel channel;  // for payload views that straddle two segments

  private Source(ByteBuffer[] segs, long size, FileChannel channel) {
    this.segs = segs;
    this.size = size;
    this.channel = channel;
  }

  static Source of(ByteBuffer bytes) {
    ByteBuffer b = bytes.slice().asReadOnlyBuffer();
    return new Source(new ByteBuffer[] {b}, b.remaining(), null);
  }

  static Source map(FileChannel ch, long size) throws IOException {
    int n = (int) ((size + SEG - 1) / SEG);
    ByteBuffer[] segs = new ByteBuffer[Math.max(n, 1)];
    if (n == 0) segs[0] = ByteBuffer.allocate(0);
    for (int i = 0; i < n; ++i) {
      long off = i * SEG;
      MappedByteBuffer m = ch.map(FileChannel.MapMode.READ_ONLY, off, Math.min(SEG, size - off));
      segs[i] = m;
    }
    return new Source(segs, size, ch);
  }

  long size() {
    return size;
  }

  byte get(long off) {
    return segs[(int) (off >>> SHIFT)].get((int) (off & (SEG - 1)));
  }

  /** Copies len bytes (callers bound len by the format's limits, never by a raw field). */
  byte[] copy(long off, int len) {
    byte[] out = new byte[len];
    int done = 0;
    while (done < len) {
      long o = off + done;
      ByteBuffer s = segs[(int) (o >>> SHIFT)].duplicate();
      int at = (int) (o & (SEG - 1));
      int n = Math.min(len - done, s.limit() - at);
      s.position(at);
      s.get(out, done, n);
      done += n;
    }
    return out;
  }

  long u64(long off) {
    return ByteBuffer.wrap(copy(off, 8)).order(ByteOrder.LITTLE_ENDIAN).getLong();
  }

  int u32(long off) {
    return ByteBuffer.wrap(copy(off, 4)).order(ByteOrder.LITTLE_ENDIAN).getInt();
  }

  /** Offset of the first non-zero byte in [off, off + len), or -1. */
  long firstNonzero(long off, long len) {
    long end = off + len;
    long o = off;
    while (o < end) {
      ByteBuffer s = segs[(int) (o >>> SHIFT)];
      int at = (int) (o & (SEG - 1));
      int n = (int) Math.min(end - o, s.limit() - at);
      for (int i = 0; i < n; ++i) {
        if (s.get(at + i) != 0) return o + i;
      }
      o += n;
    }
    return -1;
  }

  void crc(CRC32 c, long off, long len) {
    long end = off + len;
    long o = off;
    while (o < end) {
      ByteBuffer s = segs[(int) (o >>> SHIFT)].duplicate();
      int at = (int) (o & (SEG - 1));
      int n = (int) Math.min(end - o, s.limit() - at);
      s.position(at).limit(at + n);
      c.update(s);
      o += n;
    }
  }

  /** A read-only little-endian view of [off, off + len) in place; mapped anew if it straddles segments. */
  ByteBuffer view(long off, long len) throws TdumpException {
    if (len > Integer.MAX_VALUE) {
      throw TdumpException.make(ErrorCode.UNSUPPORTED, "payload of " + len
          + " bytes is larger than a Java ByteBuffer (2^31 - 1 bytes)", off);
    }
    int seg = (int) (off >>> SHIFT);
    int at = (int) (off & (SEG - 1));
    ByteBuffer s = segs[seg];
    if (at + len <= s.limit()) {
      ByteBuffer d = s.duplicate();
      d.position(at).limit(at + (int) len);
      return d.slice().asReadOnlyBuffer().order(ByteOrder.LITTLE_ENDIAN);
    }
    try {
      return channel.map(FileChannel.MapMode.READ_ONLY, off, len).asReadOnlyBuffer().order(ByteOrder.LITTLE_ENDIAN);
    } catch (IOException e) {
      throw TdumpException.make(ErrorCode.IO_ERROR, "cannot map " + len + " bytes: " + e.getMessage(), off, e);
    }
  }
}

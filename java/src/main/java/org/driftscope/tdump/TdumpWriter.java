package org.driftscope.tdump;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32;

/**
 * Streaming TDUMP writer (docs/format.md §5). Each {@link #write} appends one record with one
 * gathered write at the end of the file; nothing is memory-mapped, so a killed process leaves a
 * file whose complete records every reader recovers. {@link #close} writes the footer INDEX and
 * END. Thread-safe: records land in the order the calls are serialised.
 *
 * <pre>{@code
 * try (TdumpWriter w = TdumpWriter.create(Paths.get("phone.tdump"),
 *         new TdumpWriter.Options().meta("framework", "myengine 1.2").filter("encoder.*"))) {
 *   w.write(new TensorInfo("encoder.0", DType.F32, 2, 3).opType("Linear"), floats);
 * }
 * }</pre>
 */
public final class TdumpWriter implements AutoCloseable {
  /** The library's version, written in the {@code writer} metadata key. */
  public static final String VERSION = "0.1.0";

  /** When the writer calls fdatasync ({@link FileChannel#force}(false)). */
  public enum SyncPolicy {
    /** Once, at close (fastest; a crash may lose what the OS had buffered). */
    ON_CLOSE,
    /** After each record: {@link #write} returning means the record is durable. */
    EVERY_RECORD,
    /** Whenever {@link Options#syncBytes} more bytes were written since the last sync. */
    EVERY_BYTES
  }

  /** What happened to an offered tensor. */
  public enum Status {
    WRITTEN, FILTERED, OVER_BUDGET;

    @Override
    public String toString() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  /** The outcome of one {@link #write}. */
  public static final class WriteResult {
    public final Status status;
    /** The execution index assigned (filtered tensors consume one too). */
    public final long execIndex;
    public final long occurrence;
    /** Record offset in the file (written only, else -1). */
    public final long offset;

    WriteResult(Status status, long execIndex, long occurrence, long offset) {
      this.status = status;
      this.execIndex = execIndex;
      this.occurrence = occurrence;
      this.offset = offset;
    }

    public boolean written() {
      return status == Status.WRITTEN;
    }
  }

  /** How a file is written. Setters return {@code this}. */
  public static final class Options {
    final List<String[]> metadata = new ArrayList<>();
    String filter = "";
    SyncPolicy sync = SyncPolicy.ON_CLOSE;
    long syncBytes = 64L << 20;
    boolean append;
    boolean overwrite = true;
    boolean fixedSalt;
    long salt;

    /** Adds a run metadata entry (framework, backend, device, precision, …); order is kept. */
    public Options meta(String key, String value) {
      metadata.add(new String[] {key, value});
      return this;
    }

    /** Which tensors to record, in the syntax of docs/filters.md; "" records everything. */
    public Options filter(String text) {
      filter = text;
      return this;
    }

    public Options sync(SyncPolicy policy) {
      sync = policy;
      return this;
    }

    /** Sync after every {@code bytes} bytes ({@link SyncPolicy#EVERY_BYTES}). */
    public Options syncEvery(long bytes) {
      sync = SyncPolicy.EVERY_BYTES;
      syncBytes = bytes;
      return this;
    }

    /** Continue an existing file (§5 Append): a torn tail and the old footer are dropped, metadata kept. */
    public Options append(boolean v) {
      append = v;
      return this;
    }

    /** When not appending: replace an existing file (default) or refuse it. */
    public Options overwrite(boolean v) {
      overwrite = v;
      return this;
    }

    /** A fixed salt instead of a random one, for byte-reproducible files (tests, golden vectors). */
    public Options salt(long v) {
      fixedSalt = true;
      salt = v;
      return this;
    }
  }

  private static final byte[] ZEROS = new byte[64];
  private static final ByteBuffer ZERO_PAD = ByteBuffer.allocateDirect(64).asReadOnlyBuffer();

  private final Options opt;
  private final String path;
  private final Filter filter;
  private final long budget;  // -1: none
  private FileChannel file;
  private long salt;
  private long pos;
  private long payloadBytes;
  private boolean budgetExhausted;
  private long nextIndex;
  private long sinceSync;
  private long records;
  private boolean closed;
  private final Map<String, Long> occurrences = new HashMap<>();
  private long[] entryOffset = new long[64];
  private long[] entryHash = new long[64];
  private int[] entryOcc = new int[64];
  private short[] entryKind = new short[64];
  private ByteBuffer headBuf = ByteBuffer.allocateDirect(4096).order(ByteOrder.LITTLE_ENDIAN);
  private final CRC32 crc = new CRC32();

  private TdumpWriter(Path path, Options opt, Filter filter) {
    this.opt = opt;
    this.path = path.toString();
    this.filter = filter;
    this.budget = filter.byteBudget();
  }

  public static TdumpWriter create(Path path) throws TdumpException {
    return create(path, new Options());
  }

  public static TdumpWriter create(Path path, Options options) throws TdumpException {
    if (options.sync == SyncPolicy.EVERY_BYTES && options.syncBytes <= 0) {
      throw TdumpException.make(ErrorCode.INVALID_ARGUMENT, "sync every_bytes needs sync_bytes > 0");
    }
    Filter f = Filter.parse(options.filter == null ? "" : options.filter);
    TdumpWriter w = new TdumpWriter(path, options, f);
    try {
      if (options.append) w.openAppend(path);
      else w.openNew(path);
    } catch (TdumpException | RuntimeException e) {
      if (w.file != null) w.closeQuietly();
      throw e;
    }
    return w;
  }

  private TdumpException io(String what, IOException e) {
    String m = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    return TdumpException.make(ErrorCode.IO_ERROR, what + " '" + path + "': " + m, TdumpException.NO_OFFSET, e);
  }

  private void refuseNonRegular(Path p) throws TdumpException {
    try {
      BasicFileAttributes a = Files.readAttributes(p, BasicFileAttributes.class);
      if (!a.isRegularFile()) {
        String kind = a.isDirectory() ? "a directory" : "not a regular file";
        throw TdumpException.make(ErrorCode.IO_ERROR, "cannot write '" + path + "': it is " + kind + ", not a regular file");
      }
    } catch (IOException e) {
      // does not exist (yet): created below
    }
  }

  private void openNew(Path p) throws TdumpException {
    List<String[]> meta = new ArrayList<>(opt.metadata);
    boolean hasWriter = false;
    for (String[] kv : meta) hasWriter |= "writer".equals(kv[0]);
    if (!hasWriter) meta.add(new String[] {"writer", "driftscope " + VERSION + " (java)"});
    salt = opt.fixedSalt ? opt.salt : new SecureRandom().nextLong();
    byte[] header = Codec.encodeHeader(meta, salt);
    refuseNonRegular(p);
    try {
      file = opt.overwrite
          ? FileChannel.open(p, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)
          : FileChannel.open(p, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
    } catch (FileAlreadyExistsException e) {
      throw TdumpException.make(ErrorCode.IO_ERROR, "cannot create '" + path + "': File exists", TdumpException.NO_OFFSET, e);
    } catch (IOException e) {
      throw io("cannot create", e);
    }
    writeFully(new ByteBuffer[] {ByteBuffer.wrap(header)});
    pos = header.length;
    afterWrite(0);
  }

  private void openAppend(Path p) throws TdumpException {
    try (TdumpReader reader = TdumpReader.open(p, new TdumpReader.Options().useIndex(false))) {
      reader.checkUnchanged();
      Integrity in = reader.integrity();
      if (in.state() == Integrity.State.CORRUPT) {
        TdumpException c = in.corruption();
        throw new TdumpException(c.code(), "cannot append to a damaged file: " + c.getMessage(), c.offset(), null);
      }
      salt = reader.header().salt();
      pos = in.dataEnd();
      for (Record r : reader.records()) {
        addEntry(r.offset(), Codec.fnv1a64(Text.utf8(r.info.name())), r.info.occurrence(), r.kind() == Record.Kind.TENSOR ? 1 : 2);
        String key = identityKey(r.info);
        long occ = occurrences.getOrDefault(key, 0L);
        occurrences.put(key, Math.max(occ, r.info.occurrence() + 1));
        if (Long.compareUnsigned(r.info.execIndex() + 1, nextIndex) > 0) nextIndex = r.info.execIndex() + 1;
        payloadBytes += r.kind() == Record.Kind.TENSOR ? r.payloadLength() : 0;
        ++records;
      }
    }
    try {
      file = FileChannel.open(p, StandardOpenOption.WRITE);
      // Drop a torn tail and the old INDEX/END: they are rewritten on close (§5 Append).
      file.truncate(pos);
      file.position(pos);
    } catch (IOException e) {
      throw io("cannot append to", e);
    }
  }

  private static String identityKey(TensorInfo info) {
    return info.name() + '\0' + (char) info.role().code() + (char) info.roleIndex();
  }

  private void addEntry(long offset, long hash, long occ, int kind) throws TdumpException {
    if (records >= Limits.MAX_INDEX_ENTRIES) {
      throw TdumpException.make(ErrorCode.LIMIT_EXCEEDED, "the file already holds " + records + " records, allowed at most "
          + Limits.MAX_INDEX_ENTRIES);
    }
    int n = (int) records;
    if (n == entryOffset.length) {
      int m = n * 2;
      entryOffset = java.util.Arrays.copyOf(entryOffset, m);
      entryHash = java.util.Arrays.copyOf(entryHash, m);
      entryOcc = java.util.Arrays.copyOf(entryOcc, m);
      entryKind = java.util.Arrays.copyOf(entryKind, m);
    }
    entryOffset[n] = offset;
    entryHash[n] = hash;
    entryOcc[n] = (int) occ;
    entryKind[n] = (short) kind;
  }

  /** Writes every byte of the pieces at the channel's position, which is always the end of the file. */
  private void writeFully(ByteBuffer[] pieces) throws TdumpException {
    try {
      long want = 0;
      for (ByteBuffer b : pieces) want += b.remaining();
      while (want > 0) want -= file.write(pieces);
    } catch (IOException e) {
      throw io("cannot write", e);
    }
  }

  private void afterWrite(long n) throws TdumpException {
    sinceSync += n;
    boolean sync = opt.sync == SyncPolicy.EVERY_RECORD || (opt.sync == SyncPolicy.EVERY_BYTES && sinceSync >= opt.syncBytes);
    if (sync) {
      try {
        file.force(false);
      } catch (IOException e) {
        throw io("cannot sync", e);
      }
      sinceSync = 0;
    }
  }

  /**
   * Frame, meta and padding of a record (§3.1) in the reused direct buffer (no allocation and no
   * heap-to-native copy per record); record_crc covers frame[0..44) ‖ meta ‖ payload.
   */
  private ByteBuffer head(int kind, byte[] meta, ByteBuffer payload) {
    long plen = payload.remaining();
    int start = (int) Unsigned.align64(Codec.FRAME + meta.length);
    long recordLength = Unsigned.align64(start + plen);
    if (headBuf.capacity() < start) headBuf = ByteBuffer.allocateDirect(Integer.highestOneBit(start) * 2).order(ByteOrder.LITTLE_ENDIAN);
    ByteBuffer h = headBuf;
    h.clear();
    h.put(Codec.RECORD_MAGIC).putShort((short) kind).putShort((short) 0).putLong(recordLength).putLong(plen)
        .putInt(meta.length).putInt(0).putLong(salt);
    ByteBuffer d = h.duplicate();
    d.flip();
    crc.reset();
    crc.update(d);
    h.putInt((int) crc.getValue());
    d = h.duplicate();
    d.flip();
    crc.reset();
    crc.update(d);
    crc.update(meta, 0, meta.length);
    crc.update(payload.duplicate());
    h.putInt((int) crc.getValue());
    h.put(meta);
    h.put(ZEROS, 0, start - h.position());
    h.flip();
    return h;
  }

  /** Appends a record with one gathered write: head, the caller's payload in place, padding. */
  private long writeRecord(int kind, byte[] meta, ByteBuffer payload) throws TdumpException {
    ByteBuffer h = head(kind, meta, payload);
    long plen = payload.remaining();
    int headLen = h.remaining();
    long recordLength = Unsigned.align64(headLen + plen);
    int tail = (int) (recordLength - headLen - plen);
    ByteBuffer zeros = ZERO_PAD.duplicate();
    zeros.limit(tail);
    writeFully(new ByteBuffer[] {h, payload.duplicate(), zeros});
    long at = pos;
    pos += recordLength;
    afterWrite(recordLength);
    return at;
  }

  private synchronized WriteResult put(int kind, TensorInfo in, ByteBuffer payload, long budgetBytes) throws TdumpException {
    if (closed) throw TdumpException.make(ErrorCode.CLOSED, "write of '" + in.name() + "' after close");
    // Every offered tensor consumes an execution index and an occurrence, recorded or not, so a
    // filtered run numbers its tensors exactly like an unfiltered one (docs/filters.md).
    long exec = in.execIndex() == TensorInfo.AUTO_INDEX ? nextIndex : in.execIndex();
    if (Long.compareUnsigned(exec + 1, nextIndex) > 0) nextIndex = exec + 1;
    String key = identityKey(in);
    long counted = occurrences.getOrDefault(key, 0L);
    long occ;
    if (in.occurrence() == TensorInfo.AUTO_OCCURRENCE) {
      occ = counted;
      occurrences.put(key, counted + 1);
    } else {
      occ = in.occurrence();
      occurrences.put(key, Math.max(counted, occ + 1));
    }
    if (!filter.isEmpty() && !filter.accepts(in, exec)) return new WriteResult(Status.FILTERED, exec, occ, -1);
    // Once the budget is exhausted nothing more is recorded, so a budget-limited dump is a prefix
    // of the run in execution order (docs/filters.md).
    if (budgetExhausted || (budget >= 0 && Long.compareUnsigned(payloadBytes + budgetBytes, budget) > 0)) {
      budgetExhausted = true;
      return new WriteResult(Status.OVER_BUDGET, exec, occ, -1);
    }
    if (occ > 0xFFFFFFFEL) {
      throw TdumpException.make(ErrorCode.LIMIT_EXCEEDED, "occurrence of '" + in.name() + "' would be " + occ + ", allowed at most 4294967294");
    }
    // `in` is the writer's own validated copy; exec_index and occurrence are the only fields set here.
    TensorInfo info = in.execIndex(exec).occurrence(occ);
    byte[] name = Text.utf8(info.name());
    byte[] meta = Codec.encodeValidated(info, name);
    long hash = Codec.fnv1a64(name);
    addEntry(pos, hash, occ, kind);
    long at;
    try {
      at = writeRecord(kind, meta, payload);
    } catch (TdumpException e) {
      closed = true;  // the file may hold part of a record: a reader sees a cut there
      closeQuietly();
      throw e;
    }
    payloadBytes += budgetBytes;
    ++records;
    return new WriteResult(Status.WRITTEN, exec, occ, at);
  }

  /**
   * Records a tensor. {@code payload}'s remaining bytes are the elements, row-major,
   * little-endian (f16, bf16 and fp8 as their raw bits); they are written in place, not copied,
   * and the buffer's position is left unchanged. The descriptor is checked against the format's
   * limits exactly as a reader checks it.
   */
  public WriteResult write(TensorInfo tensor, ByteBuffer payload) throws TdumpException {
    // Validated on a copy, so a caller that changes its TensorInfo later cannot slip anything past.
    TensorInfo info = tensor.copy();
    Codec.validateTensorInfo(info, TdumpException.NO_OFFSET);
    long expected = Codec.tensorPayloadSize(info, TdumpException.NO_OFFSET);
    if (payload.remaining() != expected) {
      throw TdumpException.make(ErrorCode.LENGTH_MISMATCH, "payload of '" + info.name() + "' is " + payload.remaining()
          + " bytes, but " + Text.u64(info.numel()) + " " + info.dtype() + " elements need " + expected);
    }
    return put(Codec.KIND_TENSOR, info, payload, payload.remaining());
  }

  /** Records raw bytes (i8, u8, bool, fp8 codes, or any dtype's little-endian bytes). */
  public WriteResult write(TensorInfo info, byte[] payload) throws TdumpException {
    return write(info, ByteBuffer.wrap(payload));
  }

  /** f32 elements. */
  public WriteResult write(TensorInfo info, float[] values) throws TdumpException {
    ByteBuffer b = ByteBuffer.allocate(4 * values.length).order(ByteOrder.LITTLE_ENDIAN);
    b.asFloatBuffer().put(values);
    return write(info, b);
  }

  /** f64 elements. */
  public WriteResult write(TensorInfo info, double[] values) throws TdumpException {
    ByteBuffer b = ByteBuffer.allocate(8 * values.length).order(ByteOrder.LITTLE_ENDIAN);
    b.asDoubleBuffer().put(values);
    return write(info, b);
  }

  /** i32 or u32 elements. */
  public WriteResult write(TensorInfo info, int[] values) throws TdumpException {
    ByteBuffer b = ByteBuffer.allocate(4 * values.length).order(ByteOrder.LITTLE_ENDIAN);
    b.asIntBuffer().put(values);
    return write(info, b);
  }

  /** i64 or u64 elements. */
  public WriteResult write(TensorInfo info, long[] values) throws TdumpException {
    ByteBuffer b = ByteBuffer.allocate(8 * values.length).order(ByteOrder.LITTLE_ENDIAN);
    b.asLongBuffer().put(values);
    return write(info, b);
  }

  /** i16, u16, or the raw bits of f16 / bf16 elements. */
  public WriteResult write(TensorInfo info, short[] values) throws TdumpException {
    ByteBuffer b = ByteBuffer.allocate(2 * values.length).order(ByteOrder.LITTLE_ENDIAN);
    b.asShortBuffer().put(values);
    return write(info, b);
  }

  /** Light mode: records a summary (statistics and projection) instead of the values (§3.6). */
  public WriteResult writeSummary(TensorInfo tensor, Summary summary) throws TdumpException {
    TensorInfo info = tensor.copy();
    Codec.validateSummary(summary);
    Codec.validateTensorInfo(info, TdumpException.NO_OFFSET);
    // What a reader would refuse (§3.6), refused here rather than written (§5).
    long numel = info.numel();
    if (summary.count != numel) {
      throw TdumpException.make(ErrorCode.BAD_VALUE, "summary of '" + info.name() + "' counts " + Text.u64(summary.count)
          + " elements, its shape has " + Text.u64(numel));
    }
    long[] counts = {summary.nanCount, summary.posinfCount, summary.neginfCount, summary.zeroCount};
    long sum = 0;
    for (long c : counts) {
      if (Unsigned.addOverflows(sum, c) || Unsigned.gt(sum + c, summary.count)) {
        throw TdumpException.make(ErrorCode.BAD_VALUE, "summary of '" + info.name() + "': nan, inf and zero counts add up to more than count");
      }
      sum += c;
    }
    byte[] p = Codec.encodeSummary(summary);
    return put(Codec.KIND_SUMMARY, info, ByteBuffer.wrap(p), p.length);
  }

  /**
   * Cheap pre-check for producers: would a tensor of this name pass the filter's name clauses?
   * False means no tensor of that name can be recorded, so a hook may skip copying it.
   */
  public boolean wants(String name) {
    return filter.isEmpty() || filter.mayAcceptName(name);
  }

  /** fdatasyncs: every record written so far is durable when this returns. */
  public synchronized void flush() throws TdumpException {
    if (closed) throw TdumpException.make(ErrorCode.CLOSED, "flush after close");
    try {
      file.force(false);
    } catch (IOException e) {
      throw io("cannot sync", e);
    }
    sinceSync = 0;
  }

  /** Writes INDEX and END, syncs and closes. Idempotent. */
  @Override
  public synchronized void close() throws TdumpException {
    if (closed) return;
    closed = true;
    try {
      int n = (int) records;
      long slots = Codec.slotCount(n);
      if (slots > Integer.MAX_VALUE / 8) {
        throw TdumpException.make(ErrorCode.LIMIT_EXCEEDED, n + " records are more than this writer indexes");
      }
      byte[] imeta = new byte[24];
      Codec.le(imeta).putLong(0, n).putLong(8, slots).putInt(16, 1).putInt(20, 0);
      ByteBuffer ip = ByteBuffer.allocate((int) (24L * n + 4 * slots)).order(ByteOrder.LITTLE_ENDIAN);
      for (int i = 0; i < n; ++i) {
        ip.putLong(entryOffset[i]).putLong(entryHash[i]).putInt(entryOcc[i]).putInt(entryKind[i]);
      }
      for (int v : Codec.slotTable(entryHash, n, (int) slots)) ip.putInt(v);
      ip.flip();
      long indexOffset = writeRecord(Codec.KIND_INDEX, imeta, ip);
      byte[] emeta = new byte[16];
      Codec.le(emeta).putLong(0, indexOffset).putLong(8, records);
      writeRecord(Codec.KIND_END, emeta, ByteBuffer.allocate(0));
      try {
        file.force(false);
      } catch (IOException e) {
        throw io("cannot sync", e);
      }
    } finally {
      closeQuietly();
    }
  }

  private void closeQuietly() {
    try {
      file.close();
    } catch (IOException ignored) {
      // every byte that matters was written and synced before, or the error was reported
    }
  }

  public synchronized long recordsWritten() {
    return records;
  }

  /** The file size so far. */
  public synchronized long bytesWritten() {
    return pos;
  }

  public long salt() {
    return salt;
  }
}

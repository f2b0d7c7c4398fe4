package org.driftscope.tdump;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32;

/**
 * Reads a TDUMP file (docs/format.md §4): validates every field before it is used, recovers the
 * complete records before a torn tail, and reports corruption by code, offset and tensor name,
 * exactly as the C++ reader does (src/format/reader.cpp). Payloads are views into the
 * memory-mapped file.
 *
 * <p>Only {@link #open} fails, and only when the file cannot be opened or mapped or its header
 * is invalid; damage to records is reported by {@link #integrity()} with every record before it
 * returned. Hostile files never cause an allocation beyond the format's limits or an exception
 * other than {@link TdumpException}. Thread-safe once opened.
 */
public final class TdumpReader implements AutoCloseable {
  /** When payload checksums are checked. */
  public enum Verify {
    /** Every CRC, padding and field at open (default). */
    FULL,
    /** Frames and metas at open; TENSOR/SUMMARY payload CRCs later, by {@link #verifyPayload}. */
    FRAMES
  }

  /** How a file is opened. */
  public static final class Options {
    Verify verify = Verify.FULL;
    boolean useIndex = true;
    boolean resync;

    public Options verify(Verify v) {
      verify = v;
      return this;
    }

    /** On a clean file, report the (checked) footer index as used; the verdict and lookups are the same either way. */
    public Options useIndex(boolean v) {
      useIndex = v;
      return this;
    }

    /** After corruption, search for the next valid record at a multiple of 64 and go on. */
    public Options resync(boolean v) {
      resync = v;
      return this;
    }
  }

  private final Source bytes;
  private final Options opt;
  private final FileChannel channel;
  private final long mappedSize;
  private final String path;
  private FileHeader header;
  private final Integrity integrity = new Integrity();
  private final List<Record> records = new ArrayList<>();
  // find(): the first record of each identity. Never the footer index's probe chains, whose layout
  // the file's author chooses through the FNV-1a hashes of the names (issue 23 item 4); String keys
  // are Comparable, so even names whose hashCode() collide by design cost O(log n) in HashMap.
  private final Map<String, Integer> firstOf = new HashMap<>();

  private TdumpReader(Source bytes, Options opt, FileChannel channel, String path) {
    this.bytes = bytes;
    this.opt = opt;
    this.channel = channel;
    this.mappedSize = bytes.size();
    this.path = path;
  }

  public static TdumpReader open(Path path) throws TdumpException {
    return open(path, new Options());
  }

  /** Opens and scans a file; it must be a regular file (checked before it is opened, so a FIFO never blocks). */
  public static TdumpReader open(Path path, Options options) throws TdumpException {
    String p = path.toString();
    BasicFileAttributes a;
    try {
      a = Files.readAttributes(path, BasicFileAttributes.class);
    } catch (NoSuchFileException e) {
      throw TdumpException.make(ErrorCode.IO_ERROR, "cannot open '" + p + "': No such file or directory");
    } catch (IOException | SecurityException e) {
      throw TdumpException.make(ErrorCode.IO_ERROR, "cannot open '" + p + "': " + e.getMessage(), TdumpException.NO_OFFSET, e);
    }
    if (!a.isRegularFile()) {
      String kind = a.isDirectory() ? "a directory" : "not a regular file";
      throw TdumpException.make(ErrorCode.IO_ERROR, "cannot read '" + p + "': it is " + kind + ", not a regular file");
    }
    FileChannel ch = null;
    try {
      ch = FileChannel.open(path, StandardOpenOption.READ);
      long size = ch.size();
      TdumpReader r = new TdumpReader(Source.map(ch, size), options, ch, p);
      TdumpException loaded = null;
      try {
        r.load();
      } catch (TdumpException e) {
        loaded = e;
      } catch (InternalError e) {
        // A mapped page past the end of a file truncated under us (SIGBUS): reported below.
      }
      // A file cut under us reads as a fault past its new end: that is the error to report.
      r.checkUnchanged();
      if (loaded != null) throw loaded.prefixed(p + ": ");
      return r;
    } catch (IOException e) {
      closeQuietly(ch);
      throw TdumpException.make(ErrorCode.IO_ERROR, "cannot map '" + p + "': " + e.getMessage(), TdumpException.NO_OFFSET, e);
    } catch (TdumpException | RuntimeException e) {
      closeQuietly(ch);
      throw e;
    }
  }

  /** Reads bytes the caller keeps unchanged (tests, fuzzing, files already in memory). */
  public static TdumpReader fromBytes(ByteBuffer bytes, Options options) throws TdumpException {
    TdumpReader r = new TdumpReader(Source.of(bytes), options, null, null);
    r.load();
    return r;
  }

  public static TdumpReader fromBytes(byte[] bytes) throws TdumpException {
    return fromBytes(ByteBuffer.wrap(bytes), new Options());
  }

  private static void closeQuietly(FileChannel ch) {
    if (ch == null) return;
    try {
      ch.close();
    } catch (IOException ignored) {
      // nothing was written; the read-only handle has nothing to lose
    }
  }

  /**
   * Fails when the file shrank since it was opened (its writer truncated it): what was read
   * from the mapping may then be zeros. Call before trusting payloads read later.
   */
  public void checkUnchanged() throws TdumpException {
    if (channel == null) return;
    long now;
    try {
      now = channel.size();
    } catch (IOException e) {
      throw TdumpException.make(ErrorCode.IO_ERROR, "cannot stat '" + path + "': " + e.getMessage(), TdumpException.NO_OFFSET, e);
    }
    if (now < mappedSize) {
      throw TdumpException.make(ErrorCode.IO_ERROR, path + ": file changed while reading (it shrank from " + mappedSize
          + " to " + now + " bytes); read it again once its writer is done");
    }
  }

  /** Releases the file handle; mapped views stay valid until they are garbage. */
  @Override
  public void close() {
    closeQuietly(channel);
  }

  public FileHeader header() {
    return header;
  }

  public Integrity integrity() {
    return integrity;
  }

  /** TENSOR and SUMMARY records in file order. */
  public List<Record> records() {
    return Collections.unmodifiableList(records);
  }

  /** Every record of that name, in file order. */
  public List<Record> findAll(String name) {
    List<Record> out = new ArrayList<>();
    for (Record r : records) {
      if (r.info.name().equals(name)) out.add(r);
    }
    return out;
  }

  /** The first record of the identity (name, role + role_index, occurrence), or null. */
  public Record find(String name, long occurrence, Role role, int roleIndex) {
    Integer i = firstOf.get(identityKey(name, occurrence, role, roleIndex));
    return i == null ? null : records.get(i);
  }

  /** find(name, 0, OUTPUT, 0). */
  public Record find(String name) {
    return find(name, 0, Role.OUTPUT, 0);
  }

  /** The record_crc check deferred by {@link Verify#FRAMES}. */
  public void verifyPayload(Record r) throws TdumpException {
    long pos = r.offset;
    int metaLen = bytes.u32(pos + 24);
    long stored = bytes.u32(pos + 44) & 0xFFFFFFFFL;
    long c = recordCrc(pos, metaLen & 0xFFFFFFFFL, r.payloadLength);
    if (c != stored) {
      throw TdumpException.make(ErrorCode.BAD_RECORD_CHECKSUM, "record_crc of '" + r.info.name() + "' is 0x"
          + Text.hex8((int) stored) + ", computed 0x" + Text.hex8((int) c), pos + 44);
    }
  }

  // ---- the scan ------------------------------------------------------------------------------

  /** A frame that passed §3.1 steps 1-3. */
  private static final class Frame {
    int kind;
    int flags;
    long recordLength;
    long payloadLength;
    long metaLength;
    long recordCrc;
    long metaOff;
    long payloadOff;
  }

  /** Why a record could not be accepted: the file ends inside it (not an error). */
  private static final class Cut extends Exception {
    private static final long serialVersionUID = 1L;

    Cut() {
      super(null, null, false, false);
    }
  }

  private static final Cut CUT = new Cut();

  private Frame checkFrame(long pos) throws Cut, TdumpException {
    long size = bytes.size();
    if (size - pos < Codec.FRAME) throw CUT;
    byte[] p = bytes.copy(pos, Codec.FRAME);
    ByteBuffer b = Codec.le(p);
    boolean magicOk = p[0] == Codec.RECORD_MAGIC[0] && p[1] == Codec.RECORD_MAGIC[1] && p[2] == Codec.RECORD_MAGIC[2]
        && p[3] == Codec.RECORD_MAGIC[3];
    int stored = b.getInt(40);
    CRC32 c = new CRC32();
    c.update(p, 0, 40);
    int crc = (int) c.getValue();
    if (!magicOk || crc != stored) {
      // A writer killed mid-record may leave a short or zero-filled tail (file systems extend
      // files with zeros): that is a cut. Anything else is damage.
      if (bytes.firstNonzero(pos, size - pos) < 0) throw CUT;
      if (!magicOk) throw TdumpException.make(ErrorCode.BAD_RECORD_MAGIC, "record magic is not 8A 52 45 43", pos);
      throw TdumpException.make(ErrorCode.BAD_FRAME_CHECKSUM, "record frame_crc is 0x" + Text.hex8(stored)
          + ", computed 0x" + Text.hex8(crc), pos);
    }
    Frame f = new Frame();
    f.kind = b.getShort(4) & 0xFFFF;
    f.flags = b.getShort(6) & 0xFFFF;
    f.recordLength = b.getLong(8);
    f.payloadLength = b.getLong(16);
    f.metaLength = b.getInt(24) & 0xFFFFFFFFL;
    int reserved = b.getInt(28);
    long salt = b.getLong(32);
    f.recordCrc = b.getInt(44) & 0xFFFFFFFFL;
    if (salt != header.salt) {
      throw TdumpException.make(ErrorCode.SALT_MISMATCH, String.format("record salt 0x%016x differs from the file's 0x%016x (record from another file)",
          salt, header.salt), pos + 32);
    }
    if (reserved != 0) {
      int i = 28;
      while (p[i] == 0) ++i;
      throw TdumpException.make(ErrorCode.RESERVED_NONZERO, "record frame reserved field is not zero", pos + i);
    }
    // SKIPPABLE is meaningful only for kinds a reader may not know; on kinds 1-4 it is reserved
    // (§3.2). Reserved bits of a field with defined bits are reported at the field (§1).
    int reservedFlags = f.kind >= Codec.KIND_TENSOR && f.kind <= Codec.KIND_END ? 0xFFFF : ~Codec.FLAG_SKIPPABLE & 0xFFFF;
    if ((f.flags & reservedFlags) != 0) {
      throw TdumpException.make(ErrorCode.RESERVED_NONZERO, String.format("record flags 0x%04x use reserved bits", f.flags), pos + 6);
    }
    if (f.metaLength > Limits.MAX_META_LENGTH) {
      throw TdumpException.make(ErrorCode.LIMIT_EXCEEDED, "meta_length is " + f.metaLength + ", allowed at most "
          + Limits.MAX_META_LENGTH, pos + 24);
    }
    if (Unsigned.gt(f.payloadLength, Limits.MAX_PAYLOAD_LENGTH)) {
      throw TdumpException.make(ErrorCode.LIMIT_EXCEEDED, "payload_length is " + Text.u64(f.payloadLength)
          + ", allowed at most " + Limits.MAX_PAYLOAD_LENGTH, pos + 16);
    }
    long start = Unsigned.align64(Codec.FRAME + f.metaLength);
    long expect = Unsigned.align64(start + f.payloadLength);
    if (f.recordLength != expect) {
      throw TdumpException.make(ErrorCode.LENGTH_MISMATCH, "record_length is " + Text.u64(f.recordLength) + ", expected " + expect
          + " for meta_length " + f.metaLength + " and payload_length " + f.payloadLength, pos + 8);
    }
    if (f.recordLength > size - pos) throw CUT;
    f.metaOff = pos + Codec.FRAME;
    f.payloadOff = pos + start;
    return f;
  }

  private long recordCrc(long pos, long metaLength, long payloadLength) {
    CRC32 c = new CRC32();
    bytes.crc(c, pos, 44);
    bytes.crc(c, pos + Codec.FRAME, metaLength);
    bytes.crc(c, pos + Unsigned.align64(Codec.FRAME + metaLength), payloadLength);
    return c.getValue();
  }

  /** §3.1 step 4 and the kind-specific rules; verifyCrc false defers the payload checksum. */
  private Record checkBody(long pos, Frame f, boolean verifyCrc, String[] name) throws Cut, TdumpException {
    if (verifyCrc) {
      long c = recordCrc(pos, f.metaLength, f.payloadLength);
      if (c != f.recordCrc) {
        // Nothing after it: what a crash mid-payload leaves (the frame was written first).
        if (pos + f.recordLength == bytes.size()) throw CUT;
        throw TdumpException.make(ErrorCode.BAD_RECORD_CHECKSUM, "record_crc is 0x" + Text.hex8((int) f.recordCrc)
            + ", computed 0x" + Text.hex8((int) c), pos + 44);
      }
    }
    long metaEnd = Codec.FRAME + f.metaLength;
    long pstart = f.payloadOff - pos;
    long z = bytes.firstNonzero(pos + metaEnd, pstart - metaEnd);
    if (z >= 0) throw TdumpException.make(ErrorCode.NONZERO_PADDING, "padding after the record meta is not zero", z);
    long tail = pstart + f.payloadLength;
    z = bytes.firstNonzero(pos + tail, f.recordLength - tail);
    if (z >= 0) throw TdumpException.make(ErrorCode.NONZERO_PADDING, "padding after the payload is not zero", z);
    if (f.kind != Codec.KIND_TENSOR && f.kind != Codec.KIND_SUMMARY) return null;
    TensorInfo info = Codec.decodeTensorMeta(bytes.copy(f.metaOff, (int) f.metaLength), f.metaOff, name);
    Record out = new Record();
    out.kind = f.kind == Codec.KIND_TENSOR ? Record.Kind.TENSOR : Record.Kind.SUMMARY;
    out.offset = pos;
    out.size = f.recordLength;
    out.payloadOffset = f.payloadOff;
    out.payloadLength = f.payloadLength;
    out.source = bytes;
    if (f.kind == Codec.KIND_TENSOR) {
      long want = Codec.tensorPayloadSize(info, f.metaOff);
      if (want != f.payloadLength) {
        throw TdumpException.make(ErrorCode.LENGTH_MISMATCH, "payload_length of '" + info.name() + "' is " + f.payloadLength
            + ", but shape and dtype need " + want, pos + 16);
      }
      if (info.dtype() == DType.BOOL) {
        for (long i = 0; i < f.payloadLength; ++i) {
          int v = bytes.get(f.payloadOff + i) & 0xFF;
          if (v > 1) {
            throw TdumpException.make(ErrorCode.BAD_VALUE, "bool element " + i + " of '" + info.name() + "' is " + v, f.payloadOff + i);
          }
        }
      }
    } else {
      out.summary = Codec.decodeSummary(bytes, f.payloadOff, f.payloadLength, info.numel());
    }
    out.info = info;
    return out;
  }

  private void setCorrupt(TdumpException e, String name) {
    if (integrity.corruption != null) return;
    integrity.state = Integrity.State.CORRUPT;
    integrity.corruption = e;
    integrity.corruptName = name == null ? "" : name;
  }

  private void scan() throws TdumpException {
    long size = bytes.size();
    long pos = header.headerLength;
    boolean sawEnd = false;
    long indexPos = -1;  // the previous record was this INDEX
    integrity.validEnd = integrity.dataEnd = pos;
    while (pos < size) {
      if (sawEnd) {
        setCorrupt(TdumpException.make(ErrorCode.RECORD_AFTER_END, (size - pos) + " bytes follow the END record", pos), null);
        break;
      }
      String[] name = new String[1];
      Frame f = null;
      Record rec = null;
      try {
        f = checkFrame(pos);
        boolean last = pos + f.recordLength == size;
        // In frames mode the payload checksum is still checked for the last record (the one a
        // crash may have torn) and for every record that is not TENSOR/SUMMARY: verifyPayload()
        // cannot check those later, and the verdict must not depend on the mode (§4).
        boolean deferred = f.kind == Codec.KIND_TENSOR || f.kind == Codec.KIND_SUMMARY;
        boolean verify = opt.verify == Verify.FULL || last || !deferred;
        rec = checkBody(pos, f, verify, name);
      } catch (Cut c) {
        integrity.state = Integrity.State.CUT;
        integrity.cutOffset = pos;
        integrity.discardedBytes = size - pos;
        break;
      } catch (TdumpException e) {
        setCorrupt(e, name[0]);
        if (!opt.resync) break;
        long next = resyncFrom(pos + 64);
        integrity.warnings.add(TdumpException.make(ErrorCode.BAD_RECORD_MAGIC, "skipped " + (next - pos)
            + " damaged bytes while resynchronising", pos));
        pos = next;
        continue;
      }
      boolean damagedBefore = integrity.corruption != null;
      TdumpException fail = null;
      // Only END may follow an INDEX record (§3.5).
      if (indexPos >= 0 && f.kind != Codec.KIND_END && !damagedBefore) {
        setCorrupt(TdumpException.make(ErrorCode.BAD_INDEX, "the INDEX record at " + indexPos + " is followed by a record of kind "
            + f.kind + "; only END may follow INDEX", pos), null);
        break;
      }
      switch (f.kind) {
        case Codec.KIND_TENSOR:
        case Codec.KIND_SUMMARY:
          records.add(rec);
          indexPos = -1;
          integrity.dataEnd = pos + f.recordLength;
          break;
        case Codec.KIND_INDEX:
          // After a resynchronisation records are missing, so the index cannot agree.
          if (!damagedBefore) fail = checkIndex(pos, f);
          indexPos = pos;
          break;
        case Codec.KIND_END: {
          if (f.metaLength != 16 || f.payloadLength != 0) {
            fail = TdumpException.make(ErrorCode.LENGTH_MISMATCH, "END record must have a 16-byte meta and no payload", pos);
            break;
          }
          long idx = bytes.u64(f.metaOff);
          long count = bytes.u64(f.metaOff + 8);
          if (!damagedBefore && idx != indexPos) {
            fail = TdumpException.make(ErrorCode.BAD_INDEX, indexPos < 0
                ? "END index_offset is " + Text.u64(idx) + ", but no INDEX record precedes END"
                : "END index_offset is " + Text.u64(idx) + ", the INDEX record is at " + indexPos, f.metaOff);
            break;
          }
          if (!damagedBefore && count != records.size()) {
            fail = TdumpException.make(ErrorCode.BAD_INDEX, "END record_count is " + Text.u64(count) + ", a scan finds "
                + records.size() + " TENSOR/SUMMARY records", f.metaOff + 8);
            break;
          }
          sawEnd = true;
          break;
        }
        default:
          indexPos = -1;
          if ((f.flags & Codec.FLAG_SKIPPABLE) == 0) {
            fail = TdumpException.make(ErrorCode.UNKNOWN_RECORD_KIND, "record kind " + f.kind
                + " is unknown and not marked skippable", pos + 4);
          } else {
            integrity.dataEnd = pos + f.recordLength;
          }
      }
      if (fail != null) {
        setCorrupt(fail, null);
        break;
      }
      pos += f.recordLength;
      integrity.validEnd = pos;
    }
    if (integrity.state != Integrity.State.CORRUPT && integrity.state != Integrity.State.CUT) {
      integrity.state = sawEnd ? Integrity.State.CLEAN : Integrity.State.UNFINISHED;
    }
    integrity.checksumsVerified = opt.verify == Verify.FULL;
    // The index was checked entry by entry and slot by slot against the scan.
    integrity.indexUsed = integrity.state == Integrity.State.CLEAN && opt.useIndex;
  }

  /** check_index of src/format/index.cpp, in the order of §3.4; null when the index agrees. */
  private TdumpException checkIndex(long recordOff, Frame f) {
    if (f.metaLength != 24) {
      return TdumpException.make(ErrorCode.LENGTH_MISMATCH, "INDEX meta_length is " + f.metaLength + ", expected 24", recordOff + 24);
    }
    long metaOff = f.metaOff;
    long n = bytes.u64(metaOff);
    long slots = bytes.u64(metaOff + 8);
    long hash = bytes.u32(metaOff + 16) & 0xFFFFFFFFL;
    if (hash != 1) return TdumpException.make(ErrorCode.BAD_INDEX, "INDEX hash is " + hash + ", expected 1 (FNV-1a 64)", metaOff + 16);
    for (int i = 20; i < 24; ++i) {
      if (bytes.get(metaOff + i) != 0) return TdumpException.make(ErrorCode.RESERVED_NONZERO, "INDEX reserved field is not zero", metaOff + i);
    }
    int count = records.size();
    if (n != count) {
      return TdumpException.make(ErrorCode.BAD_INDEX, "INDEX entry_count is " + Text.u64(n) + ", a scan finds " + count
          + " TENSOR/SUMMARY records", metaOff);
    }
    long wantSlots = Codec.slotCount(n);
    if (slots != wantSlots) {
      return TdumpException.make(ErrorCode.BAD_INDEX, "INDEX slot_count is " + Text.u64(slots) + ", expected " + wantSlots
          + " for " + n + " entries", metaOff + 8);
    }
    long wantPayload = n * 24 + slots * 4;
    if (f.payloadLength != wantPayload) {
      return TdumpException.make(ErrorCode.LENGTH_MISMATCH, "INDEX payload_length is " + f.payloadLength + ", expected " + wantPayload,
          recordOff + 16);
    }
    long p = f.payloadOff;
    long[] hashes = new long[count];
    String[] names = {"offset", "name_hash", "occurrence", "kind"};
    for (int i = 0; i < count; ++i) {
      Record r = records.get(i);
      hashes[i] = Codec.fnv1a64(Text.utf8(r.info.name()));
      long e = p + 24L * i;
      long[] got = {bytes.u64(e), bytes.u64(e + 8), bytes.u32(e + 16) & 0xFFFFFFFFL, bytes.u32(e + 20) & 0xFFFFFFFFL};
      long[] want = {r.offset, hashes[i], r.info.occurrence(), r.kind == Record.Kind.TENSOR ? 1 : 2};
      long[] rel = {0, 8, 16, 20};
      for (int k = 0; k < 4; ++k) {
        if (got[k] != want[k]) {
          return TdumpException.make(ErrorCode.BAD_INDEX, "INDEX entry " + i + " " + names[k] + " is 0x" + Long.toHexString(got[k])
              + ", a scan finds 0x" + Long.toHexString(want[k]), e + rel[k]);
        }
      }
    }
    int[] table = Codec.slotTable(hashes, count, (int) slots);
    long s = p + n * 24;
    for (int i = 0; i < slots; ++i) {
      long got = bytes.u32(s + 4L * i) & 0xFFFFFFFFL;
      if (got != table[i]) {
        return TdumpException.make(ErrorCode.BAD_INDEX, "INDEX slot " + i + " holds " + got + ", linear probing in entry order puts "
            + table[i] + " there", s + 4L * i);
      }
    }
    return null;
  }

  /** Next offset (multiple of 64) holding a valid frame, or the end of the file. */
  private long resyncFrom(long pos) {
    for (; pos + Codec.FRAME <= bytes.size(); pos += 64) {
      try {
        checkFrame(pos);
        return pos;
      } catch (Cut | TdumpException e) {
        // not a frame: keep looking
      }
    }
    return bytes.size();
  }

  // Injective: the three numbers after the name hold no U+001F, so the last three separators are
  // always theirs, whatever the name holds.
  private static String identityKey(String name, long occurrence, Role role, int roleIndex) {
    return name + "\u001f" + role.code() + "\u001f" + roleIndex + "\u001f" + occurrence;
  }

  private void checkDuplicates() {
    for (int i = 0; i < records.size(); ++i) {
      Record r = records.get(i);
      TensorInfo t = r.info;
      if (firstOf.putIfAbsent(identityKey(t.name(), t.occurrence(), t.role(), t.roleIndex()), i) != null) {
        integrity.warnings.add(TdumpException.make(ErrorCode.DUPLICATE_TENSOR, "tensor '" + t.name() + "' (" + t.role() + " "
            + t.roleIndex() + ", occurrence " + t.occurrence() + ") appears again; the first one is used", r.offset));
      }
    }
  }

  private void load() throws TdumpException {
    header = Codec.decodeHeader(bytes);
    integrity.fileSize = bytes.size();
    // One walk over the records judges the whole file, the footer index included (§3.4, §4).
    scan();
    if (integrity.state != Integrity.State.CUT) integrity.cutOffset = TdumpException.NO_OFFSET;
    checkDuplicates();
  }
}

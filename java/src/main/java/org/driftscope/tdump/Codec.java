package org.driftscope.tdump;

import static org.driftscope.tdump.TdumpException.NO_OFFSET;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.zip.CRC32;

/**
 * Encoding and validating the variable parts of TDUMP: the file header with its metadata block
 * (docs/format.md §2.1, §2.3), TENSOR metas (§3.3) and SUMMARY payloads (§3.6). The writer and
 * the reader share these, so both enforce the same rules; the checks, their order and their
 * messages are those of src/format/codec.cpp.
 */
final class Codec {
  private Codec() {}

  static final byte[] FILE_MAGIC = {(byte) 0x89, 'T', 'D', 'U', 'M', 'P', 0x0D, 0x0A};
  static final byte[] RECORD_MAGIC = {(byte) 0x8A, 'R', 'E', 'C'};
  static final int BYTE_ORDER_MARK = 0x01020304;
  static final int FIXED_HEADER = 64;
  static final int FRAME = 48;
  static final int KIND_TENSOR = 1;
  static final int KIND_SUMMARY = 2;
  static final int KIND_INDEX = 3;
  static final int KIND_END = 4;
  static final int FLAG_SKIPPABLE = 1;
  static final int SUMMARY_FIXED = 112;

  static long at(long base, long rel) {
    return base == NO_OFFSET ? NO_OFFSET : base + rel;
  }

  static TdumpException err(ErrorCode c, long off, String msg) {
    return TdumpException.make(c, msg, off);
  }

  static ByteBuffer le(byte[] b) {
    return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
  }

  // ---- strings from the caller --------------------------------------------------------------

  /** check_string of codec.cpp: the length (in UTF-8 bytes), then that the text is UTF-8. */
  static byte[] checkString(String what, String s, int min, int max, long off) throws TdumpException {
    if (s == null) throw err(ErrorCode.INVALID_ARGUMENT, off, what + " is null");
    byte[] b = Text.utf8(s);
    if (b.length < min || b.length > max) {
      ErrorCode c = b.length == 0 && min > 0 && what.equals("name") ? ErrorCode.EMPTY_NAME : ErrorCode.LIMIT_EXCEEDED;
      throw err(c, off, what + " length is " + b.length + ", allowed " + min + ".." + max);
    }
    if (!Text.encodable(s)) throw err(ErrorCode.BAD_UTF8, off, what + " is not valid UTF-8");
    return b;
  }

  static String joinAxes(List<String> axes) {
    return String.join(",", axes);
  }

  // ---- the shape rule (§3.3) ----------------------------------------------------------------

  /**
   * The payload size of a tensor. The bytes the shape claims, zero dims skipped (so the position
   * of a zero does not matter), must fit in a u64 (shape_overflow) and stay within 2^48
   * (limit_exceeded); both are reported at {@code base}, the first dim.
   */
  static long tensorPayloadSize(TensorInfo info, long base) throws TdumpException {
    long n = info.dtype().size();
    for (int i = 0; i < info.rank(); ++i) {
      long d = info.dim(i);
      if (d == 0) continue;
      if (Unsigned.mulOverflows(n, d)) throw err(ErrorCode.SHAPE_OVERFLOW, base, "shape of '" + info.name() + "' overflows 64 bits");
      n *= d;
    }
    if (Unsigned.gt(n, Limits.MAX_PAYLOAD_LENGTH)) {
      throw err(ErrorCode.LIMIT_EXCEEDED, base, "shape of '" + info.name() + "' spans " + Text.u64(n)
          + " bytes (zero dims skipped), allowed at most " + Limits.MAX_PAYLOAD_LENGTH);
    }
    return info.numel() == 0 ? 0 : n;
  }

  // ---- TENSOR meta (§3.3) -------------------------------------------------------------------

  /** validate_tensor_info: every rule of §3.3 and §6; {@code base} is the offset to report. */
  static void validateTensorInfo(TensorInfo info, long base) throws TdumpException {
    checkString("name", info.name(), 1, Limits.MAX_NAME_LENGTH, base);
    checkString("op_type", info.opType(), 0, Limits.MAX_OP_TYPE_LENGTH, base);
    if (info.dtype() == null) throw err(ErrorCode.BAD_DTYPE, base, "dtype of '" + info.name() + "' is not set");
    if (info.rank() > Limits.MAX_RANK) {
      throw err(ErrorCode.LIMIT_EXCEEDED, base, "rank of '" + info.name() + "' is " + info.rank()
          + ", allowed at most " + Limits.MAX_RANK);
    }
    if (info.role() == null) throw err(ErrorCode.BAD_ENUM, base, "role of '" + info.name() + "' is not set");
    if (info.roleIndex() < 0 || info.roleIndex() > 0xFFFF) {
      throw err(ErrorCode.INVALID_ARGUMENT, base, "role_index " + info.roleIndex() + " of '" + info.name() + "' is not 0..65535");
    }
    if (info.occurrence() < 0 || info.occurrence() > 0xFFFFFFFFL) {
      throw err(ErrorCode.INVALID_ARGUMENT, base, "occurrence " + info.occurrence() + " of '" + info.name() + "' is not 0..4294967295");
    }
    List<String> axes = info.axes();
    if (!axes.isEmpty()) {
      if (axes.size() != info.rank()) {
        throw err(ErrorCode.BAD_AXES, base, "'" + info.name() + "' has " + axes.size() + " axis names for rank " + info.rank());
      }
      for (String a : axes) {
        if (a == null || a.isEmpty() || a.indexOf(',') >= 0) {
          throw err(ErrorCode.BAD_AXES, base, "axis name '" + a + "' of '" + info.name() + "' is empty or has a comma");
        }
      }
      checkString("axes", joinAxes(axes), 0, Limits.MAX_AXES_LENGTH, base);
    }
    List<String[]> attrs = info.attrsView();
    if (attrs.size() > Limits.MAX_ATTRIBUTES) {
      throw err(ErrorCode.LIMIT_EXCEEDED, base, "'" + info.name() + "' has " + attrs.size()
          + " attributes, allowed at most " + Limits.MAX_ATTRIBUTES);
    }
    Set<String> keys = attrs.isEmpty() ? null : new HashSet<>();
    for (String[] kv : attrs) {
      checkString("attribute key", kv[0], 1, Limits.MAX_KEY_LENGTH, base);
      checkString("attribute value", kv[1], 0, Limits.MAX_VALUE_LENGTH, base);
      if (!keys.add(kv[0])) {
        throw err(ErrorCode.DUPLICATE_KEY, base, "attribute '" + kv[0] + "' of '" + info.name() + "' appears twice");
      }
    }
    Encoding e = info.encoding();
    if (e == null) throw err(ErrorCode.BAD_ENUM, base, "encoding of '" + info.name() + "' is not set");
    switch (e.kind()) {
      case RAW:
        if (e.count() != 0 || e.zeroPoints().length != 0) {
          throw err(ErrorCode.BAD_ENCODING, base, "raw tensor '" + info.name() + "' has quantisation parameters");
        }
        break;
      default: {
        if (!info.dtype().isInteger()) {
          throw err(ErrorCode.BAD_ENCODING, base, "affine encoding needs an integer dtype, '" + info.name() + "' is " + info.dtype());
        }
        long want = 1;
        if (e.kind() == Encoding.Kind.AFFINE_CHANNEL) {
          if (e.axis() < 0 || e.axis() >= info.rank()) {
            throw err(ErrorCode.BAD_ENCODING, base, "channel axis " + Integer.toUnsignedString(e.axis()) + " of '" + info.name()
                + "' is not below rank " + info.rank());
          }
          long d = info.dim(e.axis());
          if (Unsigned.gt(d, 1L << 24)) {
            throw err(ErrorCode.LIMIT_EXCEEDED, base, "'" + info.name() + "' has " + Text.u64(d) + " channels, allowed at most 16777216");
          }
          want = d;
        }
        if (e.count() != want || e.zeroPoints().length != want) {
          throw err(ErrorCode.BAD_ENCODING, base, "'" + info.name() + "' has " + e.count() + " scales and "
              + e.zeroPoints().length + " zero points, expected " + want);
        }
        for (int i = 0; i < e.count(); ++i) {
          double s = e.scale(i);
          if (!Double.isFinite(s)) {
            throw err(ErrorCode.BAD_VALUE, base, "quantisation scale " + Text.fmtDouble(s) + " of '" + info.name() + "' is not finite");
          }
        }
      }
    }
    tensorPayloadSize(info, base);
  }

  /** Serialises a validated descriptor whose exec_index and occurrence are resolved. */
  static byte[] encodeTensorMeta(TensorInfo info) throws TdumpException {
    validateTensorInfo(info, NO_OFFSET);
    return encodeValidated(info, Text.utf8(info.name()));
  }

  /** encodeTensorMeta for a descriptor validateTensorInfo already passed; {@code name} is its UTF-8. */
  static byte[] encodeValidated(TensorInfo info, byte[] name) throws TdumpException {
    byte[] op = Text.utf8(info.opType());
    byte[] axes = Text.utf8(joinAxes(info.axes()));
    int size = 32 + 8 * info.rank() + name.length + op.length + axes.length;
    List<String[]> attrs = info.attrsView();
    byte[][] kvs = new byte[attrs.size() * 2][];
    for (int i = 0; i < attrs.size(); ++i) {
      kvs[2 * i] = Text.utf8(attrs.get(i)[0]);
      kvs[2 * i + 1] = Text.utf8(attrs.get(i)[1]);
      size += 6 + kvs[2 * i].length + kvs[2 * i + 1].length;
    }
    Encoding e = info.encoding();
    if (e.kind() == Encoding.Kind.AFFINE_TENSOR) size += 16;
    if (e.kind() == Encoding.Kind.AFFINE_CHANNEL) size += 8 + 16 * e.count();
    if (size > Limits.MAX_META_LENGTH) {
      throw err(ErrorCode.LIMIT_EXCEEDED, NO_OFFSET, "meta of '" + info.name() + "' would be " + size
          + " bytes, allowed at most " + Limits.MAX_META_LENGTH);
    }
    byte[] m = new byte[size];
    ByteBuffer b = le(m);
    b.putLong(info.execIndex());
    b.putInt((int) info.occurrence());
    b.putShort((short) info.dtype().code());
    b.put((byte) info.rank());
    b.put((byte) info.role().code());
    b.putShort((short) info.roleIndex());
    b.put((byte) e.kind().ordinal());
    b.put((byte) 0);
    b.putInt(0);
    b.putShort((short) name.length);
    b.putShort((short) op.length);
    b.putShort((short) axes.length);
    b.putShort((short) attrs.size());
    for (int i = 0; i < info.rank(); ++i) b.putLong(info.dim(i));
    b.put(name).put(op).put(axes);
    for (int i = 0; i < attrs.size(); ++i) {
      b.putShort((short) kvs[2 * i].length);
      b.putInt(kvs[2 * i + 1].length);
      b.put(kvs[2 * i]).put(kvs[2 * i + 1]);
    }
    if (e.kind() == Encoding.Kind.AFFINE_TENSOR) {
      b.putDouble(e.scale(0));
      b.putLong(e.zeroPoint(0));
    } else if (e.kind() == Encoding.Kind.AFFINE_CHANNEL) {
      b.putInt(e.axis());
      b.putInt(e.count());
      for (int i = 0; i < e.count(); ++i) b.putDouble(e.scale(i));
      for (int i = 0; i < e.count(); ++i) b.putLong(e.zeroPoint(i));
    }
    return m;
  }

  /** Bounds-checked little-endian cursor over a meta block. */
  static final class Cursor {
    final byte[] b;
    final ByteBuffer bb;
    final long base;
    int pos;

    Cursor(byte[] b, long base) {
      this.b = b;
      this.bb = le(b);
      this.base = base;
    }

    int remaining() {
      return b.length - pos;
    }

    long off() {
      return at(base, pos);
    }

    private TdumpException shortError(String field) {
      return err(ErrorCode.LENGTH_MISMATCH, at(base, pos), "meta ends inside field '" + field + "' (" + remaining() + " bytes left)");
    }

    private void need(int n, String field) throws TdumpException {
      if (remaining() < n) throw shortError(field);
    }

    int u8(String field) throws TdumpException {
      need(1, field);
      return b[pos++] & 0xFF;
    }

    int u16(String field) throws TdumpException {
      need(2, field);
      int v = bb.getShort(pos) & 0xFFFF;
      pos += 2;
      return v;
    }

    long u32(String field) throws TdumpException {
      need(4, field);
      long v = bb.getInt(pos) & 0xFFFFFFFFL;
      pos += 4;
      return v;
    }

    long u64(String field) throws TdumpException {
      need(8, field);
      long v = bb.getLong(pos);
      pos += 8;
      return v;
    }

    double f64(String field) throws TdumpException {
      return Double.longBitsToDouble(u64(field));
    }

    /** Start of n bytes, skipped. */
    int bytes(long n, String field) throws TdumpException {
      if (remaining() < n) throw shortError(field);
      int start = pos;
      pos += (int) n;
      return start;
    }
  }

  /**
   * Parses and validates a TENSOR/SUMMARY meta in the order of §3.3; {@code base} is the meta's
   * file offset. nameOut[0] receives the name once it could be read (for corruption reports).
   */
  static TensorInfo decodeTensorMeta(byte[] meta, long base, String[] nameOut) throws TdumpException {
    Cursor c = new Cursor(meta, base);
    TensorInfo info = new TensorInfo();
    long execIndex = c.u64("exec_index");
    long occurrence = c.u32("occurrence");
    int dtype = c.u16("dtype");
    int rank = c.u8("rank");
    int role = c.u8("role");
    int roleIndex = c.u16("role_index");
    int encoding = c.u8("encoding");
    int reserved = c.u8("reserved");
    long flags = c.u32("flags");
    int nameLen = c.u16("name_length");
    int opLen = c.u16("op_type_length");
    int axesLen = c.u16("axes_length");
    int attrCount = c.u16("attr_count");
    info.execIndex(execIndex).occurrence(occurrence);
    DType dt = DType.fromCode(dtype);
    if (dt == null) throw err(ErrorCode.BAD_DTYPE, at(base, 12), "dtype code " + dtype + " is not defined (valid: 1..15)");
    info.dtype(dt);
    if (rank > Limits.MAX_RANK) throw err(ErrorCode.LIMIT_EXCEEDED, at(base, 14), "rank is " + rank + ", allowed at most " + Limits.MAX_RANK);
    if (role > 3) throw err(ErrorCode.BAD_ENUM, at(base, 15), "role is " + role + ", allowed 0..3");
    info.role(Role.fromCode(role)).roleIndex(roleIndex);
    if (encoding > 2) throw err(ErrorCode.BAD_ENUM, at(base, 18), "encoding is " + encoding + ", allowed 0..2");
    if (reserved != 0 || flags != 0) {
      // Wholly reserved bytes are reported at the first non-zero byte (docs/format.md §1).
      int first = 19;
      while (meta[first] == 0) ++first;
      throw err(ErrorCode.RESERVED_NONZERO, at(base, first), "reserved tensor meta field is not zero");
    }
    if (nameLen == 0) throw err(ErrorCode.EMPTY_NAME, at(base, 24), "tensor name is empty");
    if (nameLen > Limits.MAX_NAME_LENGTH) {
      throw err(ErrorCode.LIMIT_EXCEEDED, at(base, 24), "name_length is " + nameLen + ", allowed 1.." + Limits.MAX_NAME_LENGTH);
    }
    if (opLen > Limits.MAX_OP_TYPE_LENGTH) {
      throw err(ErrorCode.LIMIT_EXCEEDED, at(base, 26), "op_type_length is " + opLen + ", allowed 0.." + Limits.MAX_OP_TYPE_LENGTH);
    }
    if (axesLen > Limits.MAX_AXES_LENGTH) {
      throw err(ErrorCode.LIMIT_EXCEEDED, at(base, 28), "axes_length is " + axesLen + ", allowed 0.." + Limits.MAX_AXES_LENGTH);
    }
    if (attrCount > Limits.MAX_ATTRIBUTES) {
      throw err(ErrorCode.LIMIT_EXCEEDED, at(base, 30), "attr_count is " + attrCount + ", allowed 0.." + Limits.MAX_ATTRIBUTES);
    }
    long dimsOff = c.off();
    long[] shape = new long[rank];
    for (int i = 0; i < rank; ++i) shape[i] = c.u64("dims");
    info.shape(shape);
    long nameOff = c.off();
    int n0 = c.bytes(nameLen, "name");
    if (!Text.validUtf8(meta, n0, nameLen)) throw err(ErrorCode.BAD_UTF8, nameOff, "tensor name is not valid UTF-8");
    String name = Text.str(meta, n0, nameLen);
    info.name(name);
    if (nameOut != null) nameOut[0] = name;
    // Errors are reported at the failing field (docs/format.md §4), so these run before the
    // generic validation below.
    tensorPayloadSize(info, dimsOff);
    if (encoding != 0 && !dt.isInteger()) {
      throw err(ErrorCode.BAD_ENCODING, at(base, 18), "affine encoding needs an integer dtype, '" + name + "' is " + dt);
    }
    long opOff = c.off();
    int o0 = c.bytes(opLen, "op_type");
    if (!Text.validUtf8(meta, o0, opLen)) throw err(ErrorCode.BAD_UTF8, opOff, "op_type of '" + name + "' is not valid UTF-8");
    info.opType(Text.str(meta, o0, opLen));
    long axesOff = c.off();
    int a0 = c.bytes(axesLen, "axes");
    if (!Text.validUtf8(meta, a0, axesLen)) throw err(ErrorCode.BAD_UTF8, axesOff, "axes of '" + name + "' are not valid UTF-8");
    info.axes(splitAxes(Text.str(meta, a0, axesLen)));
    Set<String> keys = new HashSet<>();
    for (int i = 0; i < attrCount; ++i) {
      // Every failure inside an attribute is reported at the attribute's start (§4).
      long attrOff = c.off();
      try {
        int klen = c.u16("attribute key_length");
        long vlen = c.u32("attribute value_length");
        if (klen == 0 || klen > Limits.MAX_KEY_LENGTH || vlen > Limits.MAX_VALUE_LENGTH) {
          throw err(ErrorCode.LIMIT_EXCEEDED, attrOff, "attribute " + i + " of '" + name + "' has key length " + klen
              + " (1.." + Limits.MAX_KEY_LENGTH + ") and value length " + vlen + " (0.." + Limits.MAX_VALUE_LENGTH + ")");
        }
        int k0 = c.bytes(klen, "attribute key");
        int v0 = c.bytes(vlen, "attribute value");
        if (!Text.validUtf8(meta, k0, klen) || !Text.validUtf8(meta, v0, (int) vlen)) {
          throw err(ErrorCode.BAD_UTF8, attrOff, "attribute " + i + " of '" + name + "' is not valid UTF-8");
        }
        String k = Text.str(meta, k0, klen);
        if (!keys.add(k)) throw err(ErrorCode.DUPLICATE_KEY, attrOff, "attribute '" + k + "' of '" + name + "' appears twice");
        info.attr(k, Text.str(meta, v0, (int) vlen));
      } catch (TdumpException e) {
        throw new TdumpException(e.code(), rehome(e, attrOff), attrOff, null);
      }
    }
    if (encoding == 1) {
      long scaleOff = c.off();
      double scale = c.f64("scale");
      if (!Double.isFinite(scale)) {
        throw err(ErrorCode.BAD_VALUE, scaleOff, "quantisation scale " + Text.fmtDouble(scale) + " of '" + name + "' is not finite");
      }
      long zp = c.u64("zero_point");
      info.encoding(Encoding.affineTensor(scale, zp));
    } else if (encoding == 2) {
      long encOff = c.off();
      long axis = c.u32("channel axis");
      long count = c.u32("channel count");
      if (axis >= rank || count != shape[(int) axis]) {
        throw err(ErrorCode.BAD_ENCODING, encOff, "channel axis " + axis + " with count " + count
            + " does not match the shape of '" + name + "'");
      }
      // Both arrays must fit in what is left before anything is allocated for them.
      if (c.remaining() / 16 < count) {
        throw err(ErrorCode.LENGTH_MISMATCH, encOff, "meta of '" + name + "' is too short for " + count + " channels");
      }
      double[] scales = new double[(int) count];
      long[] zps = new long[(int) count];
      for (int i = 0; i < count; ++i) {
        long scaleOff = c.off();
        double v = c.f64("scale");
        if (!Double.isFinite(v)) {
          throw err(ErrorCode.BAD_VALUE, scaleOff, "quantisation scale " + Text.fmtDouble(v) + " of '" + name + "' is not finite");
        }
        scales[i] = v;
      }
      for (int i = 0; i < count; ++i) zps[i] = c.u64("zero_point");
      info.encoding(Encoding.affineChannel((int) axis, scales, zps));
    }
    if (c.remaining() != 0) {
      throw err(ErrorCode.LENGTH_MISMATCH, c.off(), "meta of '" + name + "' has " + c.remaining() + " bytes after its last field");
    }
    validateTensorInfo(info, base);
    return info;
  }

  /** The message of an error re-homed at another offset (strip_offset + make_error). */
  private static String rehome(TdumpException e, long off) {
    String m = e.bareMessage();
    return off == NO_OFFSET ? m : m + " (at offset " + Text.u64(off) + ")";
  }

  static List<String> splitAxes(String axes) {
    List<String> out = new java.util.ArrayList<>();
    if (axes.isEmpty()) return out;
    int start = 0;
    while (true) {
      int comma = axes.indexOf(',', start);
      out.add(comma < 0 ? axes.substring(start) : axes.substring(start, comma));
      if (comma < 0) break;
      start = comma + 1;
    }
    return out;
  }

  // ---- file header (§2.1, §2.3) -------------------------------------------------------------

  static byte[] encodeHeader(List<String[]> metadata, long salt) throws TdumpException {
    if (metadata.size() > Limits.MAX_METADATA_ENTRIES) {
      throw err(ErrorCode.LIMIT_EXCEEDED, NO_OFFSET, metadata.size() + " metadata entries, allowed at most " + Limits.MAX_METADATA_ENTRIES);
    }
    ByteArrayOutputStream meta = new ByteArrayOutputStream();
    Set<String> keys = new HashSet<>();
    byte[] len = new byte[4];
    for (String[] kv : metadata) {
      byte[] k = checkString("metadata key", kv[0], 1, Limits.MAX_KEY_LENGTH, NO_OFFSET);
      byte[] v = checkString("metadata value", kv[1], 0, Limits.MAX_VALUE_LENGTH, NO_OFFSET);
      if (!keys.add(kv[0])) throw err(ErrorCode.DUPLICATE_KEY, NO_OFFSET, "metadata key '" + kv[0] + "' appears twice");
      le(len).putInt(0, k.length);
      meta.write(len, 0, 4);
      meta.write(k, 0, k.length);
      le(len).putInt(0, v.length);
      meta.write(len, 0, 4);
      meta.write(v, 0, v.length);
    }
    byte[] mb = meta.toByteArray();
    long headerLength = Unsigned.align64(FIXED_HEADER + (long) mb.length);
    if (headerLength > Limits.MAX_HEADER_LENGTH) {
      throw err(ErrorCode.LIMIT_EXCEEDED, NO_OFFSET, "header would be " + headerLength + " bytes, allowed at most " + Limits.MAX_HEADER_LENGTH);
    }
    byte[] h = new byte[(int) headerLength];
    ByteBuffer b = le(h);
    b.put(FILE_MAGIC);
    b.putShort((short) 1).putShort((short) 0).putInt(BYTE_ORDER_MARK).putLong(salt);
    b.putInt(0).putInt(0).putInt((int) headerLength).putInt(mb.length).putInt(metadata.size());
    System.arraycopy(mb, 0, h, FIXED_HEADER, mb.length);
    CRC32 c = new CRC32();
    c.update(h, 0, 60);
    c.update(mb, 0, mb.length);
    b.putInt(60, (int) c.getValue());
    return h;
  }

  /** Validates the header in the order of §2.1, so every reader reports the same first failure. */
  static FileHeader decodeHeader(Source file) throws TdumpException {
    long size = file.size();
    if (size < FIXED_HEADER) {
      throw err(ErrorCode.TRUNCATED_HEADER, size, "file is " + size + " bytes, shorter than the 64-byte header");
    }
    byte[] p = file.copy(0, FIXED_HEADER);
    ByteBuffer b = le(p);
    for (int i = 0; i < 8; ++i) {
      if (p[i] != FILE_MAGIC[i]) throw err(ErrorCode.BAD_MAGIC, 0, "not a TDUMP file (magic is not 89 54 44 55 4D 50 0D 0A)");
    }
    FileHeader h = new FileHeader();
    h.versionMajor = b.getShort(8) & 0xFFFF;
    h.versionMinor = b.getShort(10) & 0xFFFF;
    if (h.versionMajor != 1) {
      throw err(ErrorCode.UNSUPPORTED_VERSION, 8, "format version " + h.versionMajor + "." + h.versionMinor
          + " is not supported (this reader reads 1.x)");
    }
    int bom = b.getInt(12);
    if (bom != BYTE_ORDER_MARK) {
      throw err(ErrorCode.BAD_BYTE_ORDER, 12, "byte_order is 0x" + Text.hex8(bom) + ", expected 0x01020304 (little-endian)");
    }
    h.salt = b.getLong(16);
    h.requiredFeatures = b.getInt(24);
    h.optionalFeatures = b.getInt(28);
    long headerLength = b.getInt(32) & 0xFFFFFFFFL;
    long metaLen = b.getInt(36) & 0xFFFFFFFFL;
    long metaCount = b.getInt(40) & 0xFFFFFFFFL;
    if (headerLength > Limits.MAX_HEADER_LENGTH) {
      throw err(ErrorCode.LIMIT_EXCEEDED, 32, "header_length is " + headerLength + ", allowed at most " + Limits.MAX_HEADER_LENGTH);
    }
    if (headerLength != Unsigned.align64(FIXED_HEADER + metaLen)) {
      throw err(ErrorCode.LENGTH_MISMATCH, 32, "header_length " + headerLength + " does not match metadata_length " + metaLen
          + " (expected align64(64 + " + metaLen + "))");
    }
    if (size < headerLength) {
      throw err(ErrorCode.TRUNCATED_HEADER, size, "file is " + size + " bytes, shorter than its " + headerLength + "-byte header");
    }
    h.headerLength = (int) headerLength;
    byte[] whole = file.copy(0, (int) headerLength);
    CRC32 c = new CRC32();
    c.update(whole, 0, 60);
    c.update(whole, FIXED_HEADER, (int) metaLen);
    int crc = (int) c.getValue();
    int stored = b.getInt(60);
    if (crc != stored) {
      throw err(ErrorCode.BAD_HEADER_CHECKSUM, 60, "header_crc is 0x" + Text.hex8(stored) + ", computed 0x" + Text.hex8(crc));
    }
    if (h.requiredFeatures != 0) {
      throw err(ErrorCode.UNSUPPORTED_FEATURE, 24, "file requires feature bits 0x" + Text.hex8(h.requiredFeatures)
          + " that this reader does not know");
    }
    if (metaCount > Limits.MAX_METADATA_ENTRIES) {
      throw err(ErrorCode.LIMIT_EXCEEDED, 40, "metadata_count is " + metaCount + ", allowed at most " + Limits.MAX_METADATA_ENTRIES);
    }
    for (int i = 44; i < 60; ++i) {
      if (whole[i] != 0) throw err(ErrorCode.RESERVED_NONZERO, i, "reserved header byte is not zero");
    }
    for (int i = FIXED_HEADER + (int) metaLen; i < headerLength; ++i) {
      if (whole[i] != 0) throw err(ErrorCode.NONZERO_PADDING, i, "header padding byte is not zero");
    }
    byte[] mb = java.util.Arrays.copyOfRange(whole, FIXED_HEADER, FIXED_HEADER + (int) metaLen);
    Cursor cur = new Cursor(mb, FIXED_HEADER);
    Set<String> keys = new HashSet<>();
    for (int i = 0; i < metaCount; ++i) {
      // Every failure inside an entry is reported at the entry's start (docs/format.md §4).
      long off = cur.off();
      try {
        long klen = cur.u32("metadata key_length");
        if (klen == 0 || klen > Limits.MAX_KEY_LENGTH) {
          throw err(ErrorCode.LIMIT_EXCEEDED, off, "metadata key_length is " + klen + ", allowed 1.." + Limits.MAX_KEY_LENGTH);
        }
        int k0 = cur.bytes(klen, "metadata key");
        long vlen = cur.u32("metadata value_length");
        if (vlen > Limits.MAX_VALUE_LENGTH) {
          throw err(ErrorCode.LIMIT_EXCEEDED, off, "metadata value_length is " + vlen + ", allowed 0.." + Limits.MAX_VALUE_LENGTH);
        }
        int v0 = cur.bytes(vlen, "metadata value");
        if (!Text.validUtf8(mb, k0, (int) klen) || !Text.validUtf8(mb, v0, (int) vlen)) {
          throw err(ErrorCode.BAD_UTF8, off, "metadata entry " + i + " is not valid UTF-8");
        }
        String k = Text.str(mb, k0, (int) klen);
        if (!keys.add(k)) throw err(ErrorCode.DUPLICATE_KEY, off, "metadata key '" + k + "' appears twice");
        h.metadata.add(new String[] {k, Text.str(mb, v0, (int) vlen)});
      } catch (TdumpException e) {
        throw new TdumpException(e.code(), Text.printable("metadata entry " + i + ": ") + rehome(e, off), off, null);
      }
    }
    if (cur.remaining() != 0) {
      throw err(ErrorCode.LENGTH_MISMATCH, cur.off(), "metadata block has " + cur.remaining() + " bytes after its last entry");
    }
    return h;
  }

  // ---- SUMMARY payload (§3.6) ---------------------------------------------------------------

  static void validateSummary(Summary s) throws TdumpException {
    if (s.projection == null) throw err(ErrorCode.INVALID_ARGUMENT, NO_OFFSET, "summary projection is null");
    if (s.projection.length > Limits.MAX_PROJECTION_DIM) {
      throw err(ErrorCode.LIMIT_EXCEEDED, NO_OFFSET, "projection_dim is " + s.projection.length + ", allowed at most " + Limits.MAX_PROJECTION_DIM);
    }
    if (s.projectionKind != 1) {
      throw err(ErrorCode.BAD_ENUM, NO_OFFSET, "projection_kind is " + Integer.toUnsignedString(s.projectionKind) + ", allowed 1");
    }
  }

  static byte[] encodeSummary(Summary s) {
    byte[] out = new byte[SUMMARY_FIXED + 4 * s.projection.length];
    ByteBuffer b = le(out);
    b.putLong(s.count).putLong(s.nanCount).putLong(s.posinfCount).putLong(s.neginfCount).putLong(s.zeroCount);
    b.putDouble(s.min).putDouble(s.max).putDouble(s.mean).putDouble(s.std).putDouble(s.l2Norm);
    b.putLong(s.projectionSeed).putInt(s.projection.length).putInt(s.projectionKind);
    b.position(SUMMARY_FIXED);
    for (float f : s.projection) b.putFloat(f);
    return out;
  }

  /** Checks in the order of §3.6; {@code numel} is the element count of the meta's shape. */
  static Summary decodeSummary(Source src, long base, long length, long numel) throws TdumpException {
    if (length < SUMMARY_FIXED) {
      throw err(ErrorCode.LENGTH_MISMATCH, base, "summary payload is " + length + " bytes, at least 112 expected");
    }
    byte[] p = src.copy(base, SUMMARY_FIXED);
    ByteBuffer b = le(p);
    Summary s = new Summary();
    s.count = b.getLong(0);
    s.nanCount = b.getLong(8);
    s.posinfCount = b.getLong(16);
    s.neginfCount = b.getLong(24);
    s.zeroCount = b.getLong(32);
    s.min = b.getDouble(40);
    s.max = b.getDouble(48);
    s.mean = b.getDouble(56);
    s.std = b.getDouble(64);
    s.l2Norm = b.getDouble(72);
    s.projectionSeed = b.getLong(80);
    long dim = b.getInt(88) & 0xFFFFFFFFL;
    s.projectionKind = b.getInt(92);
    if (dim > Limits.MAX_PROJECTION_DIM) {
      throw err(ErrorCode.LIMIT_EXCEEDED, at(base, 88), "projection_dim is " + dim + ", allowed at most " + Limits.MAX_PROJECTION_DIM);
    }
    if (length != SUMMARY_FIXED + 4 * dim) {
      throw err(ErrorCode.LENGTH_MISMATCH, base, "summary payload is " + length + " bytes, expected 112 + 4 x " + dim);
    }
    if (s.projectionKind != 1) {
      throw err(ErrorCode.BAD_ENUM, at(base, 92), "projection_kind is " + Integer.toUnsignedString(s.projectionKind) + ", allowed 1");
    }
    for (int i = 96; i < 112; ++i) {
      if (p[i] != 0) throw err(ErrorCode.RESERVED_NONZERO, at(base, i), "reserved summary byte is not zero");
    }
    if (s.count != numel) {
      throw err(ErrorCode.BAD_VALUE, base, "summary counts " + Text.u64(s.count) + " elements, its shape has " + Text.u64(numel));
    }
    boolean over = Unsigned.addOverflows(s.nanCount, s.posinfCount);
    long counted = s.nanCount + s.posinfCount;
    over |= Unsigned.addOverflows(counted, s.neginfCount);
    counted += s.neginfCount;
    over |= Unsigned.addOverflows(counted, s.zeroCount);
    counted += s.zeroCount;
    if (over || Unsigned.gt(counted, s.count)) {
      throw err(ErrorCode.BAD_VALUE, at(base, 8), "summary nan, inf and zero counts add up to more than count");
    }
    ByteBuffer proj = le(src.copy(base + SUMMARY_FIXED, (int) (4 * dim)));
    s.projection = new float[(int) dim];
    for (int i = 0; i < dim; ++i) s.projection[i] = proj.getFloat(4 * i);
    return s;
  }

  // ---- INDEX (§3.4) -------------------------------------------------------------------------

  static long fnv1a64(byte[] b) {
    long h = 0xcbf29ce484222325L;
    for (byte x : b) {
      h ^= x & 0xFF;
      h *= 0x100000001b3L;
    }
    return h;
  }

  static long slotCount(long entries) {
    long m = 1;
    while (Unsigned.lt(m, 2 * entries)) m <<= 1;
    return m;
  }

  /**
   * Linear probing in entry order (§3.4), so every writer builds the identical table. Entry i lands
   * in the first empty slot cyclically at or after its home; next[s] leads, by path-halved links, to
   * the first empty slot at or after s, so names whose FNV-1a hashes share their low bits (one
   * cluster of n entries) cost O(n log n) instead of the probing loop's O(n²) (issue 23 item 4:
   * 200k such names took 18 s to open). The slots are those of the probing loop, byte for byte.
   */
  static int[] slotTable(long[] hashes, int n, int slots) {
    int[] table = new int[slots];
    int[] next = new int[slots];
    for (int s = 0; s < slots; ++s) next[s] = s;
    for (int i = 0; i < n; ++i) {
      // slots >= 2n > i: an empty slot always exists, so the walk ends.
      int s = (int) (hashes[i] & (slots - 1));
      while (next[s] != s) {
        next[s] = next[next[s]];
        s = next[s];
      }
      table[s] = i + 1;
      next[s] = (s + 1) & (slots - 1);
    }
    return table;
  }
}

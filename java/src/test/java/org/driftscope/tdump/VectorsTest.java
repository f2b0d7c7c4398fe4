package org.driftscope.tdump;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * The golden vectors (tests/vectors, made by generate.py from the spec writer) against the Java
 * reader and writer, as tests/unit/format/vectors_test.cpp holds the C++ ones: every vector reads
 * back as its JSON sidecar says in every read mode, and the writer reproduces every valid vector
 * (but private_record, a kind no writer API makes) byte for byte.
 */
public final class VectorsTest {
  private static final String[] DIRS = {"valid", "damaged", "rejected", "invalid"};

  public static void main(String[] args) throws Exception {
    Path vectors = Check.root().resolve("tests/vectors");
    int[] seen = new int[4];
    int written = 0;
    for (int d = 0; d < DIRS.length; ++d) {
      List<Path> sidecars;
      try (Stream<Path> s = Files.list(vectors.resolve(DIRS[d]))) {
        sidecars = s.filter(p -> p.toString().endsWith(".json")).sorted().collect(Collectors.toList());
      }
      for (Path json : sidecars) {
        Map<String, Object> want = Json.obj(Json.parse(new String(Files.readAllBytes(json), StandardCharsets.UTF_8)));
        Path file = json.resolveSibling((String) want.get("file"));
        String where = DIRS[d] + "/" + file.getFileName();
        try {
          checkVector(file, want);
          if (DIRS[d].equals("valid") && !file.getFileName().toString().equals("private_record.tdump")) {
            reproduce(file, want);
            written++;
          }
        } catch (AssertionError | RuntimeException e) {
          throw new AssertionError(where + ": " + e.getMessage(), e);
        }
        seen[d]++;
      }
    }
    Check.that(seen[0] >= 8 && seen[1] >= 6 && seen[2] >= 20 && seen[3] >= 10, "every kind of vector is present");
    Check.eq(seen[0] - 1, written, "the writer reproduced every valid vector but private_record");
    summaryIsRecomputable(vectors);
    Check.done("VectorsTest (" + seen[0] + " valid, " + seen[1] + " damaged, " + seen[2] + " rejected, " + seen[3] + " invalid)");
  }

  private static TdumpReader.Options[] modes() {
    return new TdumpReader.Options[] {
      new TdumpReader.Options(),
      new TdumpReader.Options().useIndex(false),
      new TdumpReader.Options().verify(TdumpReader.Verify.FRAMES),
    };
  }

  private static final String[] MODE_NAMES = {"index", "scan", "frames"};

  static String sha256(byte[] b) throws Exception {
    return hex(MessageDigest.getInstance("SHA-256").digest(b));
  }

  static String hex(byte[] d) {
    StringBuilder s = new StringBuilder();
    for (byte x : d) s.append(String.format("%02x", x & 0xFF));
    return s.toString();
  }

  private static void checkVector(Path file, Map<String, Object> want) throws Exception {
    byte[] blob = Files.readAllBytes(file);
    Check.eq(want.get("sha256"), sha256(blob), "the vector file is the one its sidecar describes");
    TdumpReader.Options[] modes = modes();
    for (int m = 0; m < modes.length; ++m) {
      String mode = MODE_NAMES[m];
      TdumpReader.Options opt = modes[m];
      if (want.containsKey("error")) {
        Map<String, Object> e = Json.obj(want.get("error"));
        TdumpException got = Check.fails(ErrorCode.fromName((String) e.get("code")), () -> TdumpReader.open(file, opt), mode);
        Check.eq(Json.lng(e.get("offset")), got.offset(), mode + " error offset");
        Check.that(got.getMessage().startsWith(file.toString() + ": "), mode + " the message names the file: " + got.getMessage());
        Check.that(got.getMessage().endsWith(" (at offset " + got.offset() + ")"), mode + " the message ends with the offset");
        continue;
      }
      try (TdumpReader r = TdumpReader.open(file, opt)) {
        checkRead(r, want, mode);
      }
    }
  }

  private static void checkRead(TdumpReader r, Map<String, Object> want, String mode) throws Exception {
    Map<String, Object> wi = Json.obj(want.get("integrity"));
    List<Object> wantRecords = Json.arr(want.get("records"));
    // Verify.FRAMES defers payload checksums to verifyPayload() (except for the last record, the
    // one a crash may have torn), so a bad record CRC in the middle is found there.
    Object wc = wi.get("corruption");
    if (mode.equals("frames") && wc != null && "bad_record_checksum".equals(Json.obj(wc).get("code"))) {
      Check.that(r.records().size() > wantRecords.size(), mode + " the damaged record is listed");
      for (int i = 0; i < wantRecords.size(); ++i) checkRecord(r.records().get(i), Json.obj(wantRecords.get(i)), mode + " record " + i);
      Record bad = r.records().get(wantRecords.size());
      Check.eq(Json.lng(Json.obj(wc).get("record_offset")), bad.offset(), mode + " damaged record offset");
      TdumpException e = Check.fails(ErrorCode.BAD_RECORD_CHECKSUM, () -> r.verifyPayload(bad), mode + " verifyPayload");
      Check.eq(Json.lng(Json.obj(wc).get("offset")), e.offset(), mode + " verifyPayload offset");
      return;
    }
    Map<String, Object> h = Json.obj(want.get("header"));
    List<Object> version = Json.arr(h.get("version"));
    Check.eq(Json.lng(version.get(0)), (long) r.header().versionMajor(), mode + " version");
    Check.eq(Json.lng(version.get(1)), (long) r.header().versionMinor(), mode + " minor");
    Check.eq(Json.lng(h.get("salt")), r.header().salt(), mode + " salt");
    List<Object> meta = Json.arr(h.get("metadata"));
    Check.eq(meta.size(), r.header().metadata().size(), mode + " metadata count");
    for (int i = 0; i < meta.size(); ++i) {
      List<Object> kv = Json.arr(meta.get(i));
      Check.eq(kv.get(0), r.header().metadata().get(i)[0], mode + " metadata key " + i);
      Check.eq(kv.get(1), r.header().metadata().get(i)[1], mode + " metadata value " + i);
    }
    Map<String, Object> in = Json.obj(want.get("integrity"));
    Integrity got = r.integrity();
    Check.eq(in.get("state"), got.state().toString(), mode + " state");
    Check.eq(Json.lng(in.get("valid_end")), got.validEnd(), mode + " valid_end");
    Check.eq(Json.lng(want.get("size")), got.fileSize(), mode + " file size");
    Check.that(got.warnings().isEmpty(), mode + " no warnings: " + got.warnings());
    Check.eq(in.get("cut_offset") == null ? TdumpException.NO_OFFSET : Json.lng(in.get("cut_offset")), got.cutOffset(), mode + " cut_offset");
    Check.eq(Json.lng(in.get("discarded_bytes")), got.discardedBytes(), mode + " discarded_bytes");
    Object corruption = in.get("corruption");
    if (corruption == null) {
      Check.that(got.corruption() == null, mode + " no corruption, got " + got.corruption());
    } else {
      Map<String, Object> c = Json.obj(corruption);
      Check.that(got.corruption() != null, mode + " corruption reported");
      Check.eq(c.get("code"), got.corruption().code().codeName(), mode + " corruption code (" + got.corruption() + ")");
      Check.eq(Json.lng(c.get("offset")), got.corruption().offset(), mode + " corruption offset (" + got.corruption() + ")");
      Check.eq(c.get("name") == null ? "" : c.get("name"), got.corruptName(), mode + " corrupt name");
    }
    Check.eq(got.state() == Integrity.State.CLEAN && !mode.equals("scan"), got.indexUsed(), mode + " index used");
    List<Object> records = Json.arr(want.get("records"));
    Check.eq(records.size(), r.records().size(), mode + " record count");
    for (int i = 0; i < records.size(); ++i) {
      Record rec = r.records().get(i);
      Map<String, Object> w = Json.obj(records.get(i));
      checkRecord(rec, w, mode + " record " + i);
      if (mode.equals("frames")) r.verifyPayload(rec);
      TensorInfo t = info(w);
      Record found = r.find(t.name(), t.occurrence(), t.role(), t.roleIndex());
      Check.that(found != null, mode + " find " + t.name());
      Check.eq(Json.lng(w.get("offset")), found.offset(), mode + " find offset " + t.name());
    }
  }

  /** The TensorInfo a sidecar record describes (exec_index and occurrence as stored). */
  static TensorInfo info(Map<String, Object> r) {
    TensorInfo t = new TensorInfo();
    t.name((String) r.get("name")).opType((String) r.get("op_type")).role(Role.parse((String) r.get("role")))
        .roleIndex((int) Json.lng(r.get("role_index"))).execIndex(Json.lng(r.get("exec_index")))
        .occurrence(Json.lng(r.get("occurrence"))).dtype(DType.parse((String) r.get("dtype")));
    List<Object> shape = Json.arr(r.get("shape"));
    long[] dims = new long[shape.size()];
    for (int i = 0; i < dims.length; ++i) dims[i] = Json.lng(shape.get(i));
    t.shape(dims);
    List<String> axes = new ArrayList<>();
    for (Object a : Json.arr(r.get("axes"))) axes.add((String) a);
    t.axes(axes);
    for (Object kv : Json.arr(r.get("attrs"))) t.attr((String) Json.arr(kv).get(0), (String) Json.arr(kv).get(1));
    Map<String, Object> e = Json.obj(r.get("encoding"));
    String kind = (String) e.get("kind");
    if (!kind.equals("raw")) {
      List<Object> sc = Json.arr(e.get("scales"));
      List<Object> zp = Json.arr(e.get("zero_points"));
      double[] scales = new double[sc.size()];
      long[] zps = new long[zp.size()];
      for (int i = 0; i < scales.length; ++i) scales[i] = Json.dbl(sc.get(i));
      for (int i = 0; i < zps.length; ++i) zps[i] = Json.lng(zp.get(i));
      t.encoding(kind.equals("affine_tensor") ? Encoding.affineTensor(scales[0], zps[0])
          : Encoding.affineChannel((int) Json.lng(e.get("axis")), scales, zps));
    }
    return t;
  }

  static Summary summary(Map<String, Object> s) {
    Summary out = new Summary();
    out.count = Json.lng(s.get("count"));
    out.nanCount = Json.lng(s.get("nan_count"));
    out.posinfCount = Json.lng(s.get("posinf_count"));
    out.neginfCount = Json.lng(s.get("neginf_count"));
    out.zeroCount = Json.lng(s.get("zero_count"));
    out.min = Json.dbl(s.get("min"));
    out.max = Json.dbl(s.get("max"));
    out.mean = Json.dbl(s.get("mean"));
    out.std = Json.dbl(s.get("std"));
    out.l2Norm = Json.dbl(s.get("l2_norm"));
    out.projectionSeed = Json.lng(s.get("projection_seed"));
    out.projectionKind = (int) Json.lng(s.get("projection_kind"));
    List<Object> p = Json.arr(s.get("projection"));
    out.projection = new float[p.size()];
    for (int i = 0; i < p.size(); ++i) out.projection[i] = (float) Json.dbl(p.get(i));
    return out;
  }

  private static void checkRecord(Record got, Map<String, Object> w, String where) throws Exception {
    TensorInfo want = info(w);
    TensorInfo t = got.info();
    Check.eq(w.get("kind"), got.kind().toString(), where + " kind");
    Check.eq(want.name(), t.name(), where + " name");
    Check.eq(want.occurrence(), t.occurrence(), where + " occurrence");
    Check.eq(want.execIndex(), t.execIndex(), where + " exec_index");
    Check.eq(want.opType(), t.opType(), where + " op_type");
    Check.eq(want.role(), t.role(), where + " role");
    Check.eq(want.roleIndex(), t.roleIndex(), where + " role_index");
    Check.eq(want.dtype(), t.dtype(), where + " dtype");
    Check.that(java.util.Arrays.equals(want.shape(), t.shape()), where + " shape");
    Check.eq(want.axes(), t.axes(), where + " axes");
    Check.eq(want.attrs().size(), t.attrs().size(), where + " attr count");
    for (int i = 0; i < want.attrs().size(); ++i) {
      Check.that(java.util.Arrays.equals(want.attrs().get(i), t.attrs().get(i)), where + " attr " + i);
    }
    Check.eq(want.encoding(), t.encoding(), where + " encoding");
    Check.eq(Json.lng(w.get("offset")), got.offset(), where + " offset");
    Check.eq(Json.lng(w.get("size")), got.size(), where + " size");
    Check.eq(Json.lng(w.get("payload_offset")), got.payloadOffset(), where + " payload_offset");
    Check.eq(Json.lng(w.get("payload_length")), got.payloadLength(), where + " payload_length");
    ByteBuffer p = got.payload();
    Check.eq(ByteOrder.LITTLE_ENDIAN, p.order(), where + " payload view is little-endian");
    Check.that(p.isReadOnly(), where + " payload view is read-only");
    byte[] bytes = new byte[p.remaining()];
    p.duplicate().get(bytes);
    Check.eq(w.get("payload_sha256"), sha256(bytes), where + " payload sha256");
    if (got.kind() == Record.Kind.SUMMARY) {
      Summary a = got.summary();
      Summary b = summary(Json.obj(w.get("summary")));
      Check.eq(b.count, a.count, where + " count");
      Check.eq(b.nanCount, a.nanCount, where + " nan_count");
      Check.eq(b.posinfCount, a.posinfCount, where + " posinf_count");
      Check.eq(b.neginfCount, a.neginfCount, where + " neginf_count");
      Check.eq(b.zeroCount, a.zeroCount, where + " zero_count");
      Check.same(b.min, a.min, where + " min");
      Check.same(b.max, a.max, where + " max");
      Check.same(b.mean, a.mean, where + " mean");
      Check.same(b.std, a.std, where + " std");
      Check.same(b.l2Norm, a.l2Norm, where + " l2_norm");
      Check.eq(b.projectionSeed, a.projectionSeed, where + " seed");
      Check.that(java.util.Arrays.equals(b.projection, a.projection), where + " projection");
      return;
    }
    List<Object> values = Json.arr(w.get("values"));
    double[] decoded = Values.decode(got);
    Check.eq(values.size(), decoded.length, where + " element count");
    ByteBuffer q = got.payload();
    for (int i = 0; i < values.size(); ++i) {
      Object v = values.get(i);
      DType dt = t.dtype();
      if (dt == DType.BOOL) {
        Check.eq(v, q.get(i) == 1, where + " bool " + i);
      } else if (dt.isInteger()) {
        long raw = dt.size() == 1 ? (dt == DType.U8 ? q.get(i) & 0xFF : q.get(i))
            : dt.size() == 2 ? (dt == DType.U16 ? q.getShort(2 * i) & 0xFFFF : q.getShort(2 * i))
            : dt.size() == 4 ? (dt == DType.U32 ? q.getInt(4 * i) & 0xFFFFFFFFL : q.getInt(4 * i)) : q.getLong(8 * i);
        Check.eq(Json.lng(v), raw, where + " element " + i);
        Check.same(dt == DType.U64 ? Values.u64ToDouble(raw) : (double) raw, decoded[i], where + " decoded integer " + i);
      } else {
        Check.same(Json.dbl(v), decoded[i], where + " element " + i);
      }
    }
    if (w.containsKey("dequantized")) {
      List<Object> dq = Json.arr(w.get("dequantized"));
      double[] mine = Values.dequantize(got);
      for (int i = 0; i < dq.size(); ++i) Check.same(Json.dbl(dq.get(i)), mine[i], where + " dequantized " + i);
    }
  }

  /**
   * The writer, fed the sidecar's records in order with the payload bytes of the golden file,
   * writes the golden file exactly; "sessions" split the records into writer sessions, each after
   * the first reopening the file for append (§5); an unfinished vector is compared before close.
   */
  private static void reproduce(Path golden, Map<String, Object> want) throws Exception {
    byte[] bytes = Files.readAllBytes(golden);
    Path out = Files.createTempFile("tdump_java_vec_", ".tdump");
    try {
      Map<String, Object> h = Json.obj(want.get("header"));
      List<Object> records = Json.arr(want.get("records"));
      Map<String, Object> wr = Json.obj(want.get("writer"));
      boolean closed = (Boolean) wr.get("closed");
      List<Object> sessions = Json.arr(wr.get("sessions"));
      int next = 0;
      TdumpWriter stillOpen = null;
      for (int s = 0; s < sessions.size(); ++s) {
        TdumpWriter.Options opt = new TdumpWriter.Options().salt(Json.lng(h.get("salt"))).append(s > 0);
        for (Object kv : Json.arr(h.get("metadata"))) opt.meta((String) Json.arr(kv).get(0), (String) Json.arr(kv).get(1));
        TdumpWriter w = TdumpWriter.create(out, opt);
        long n = Json.lng(sessions.get(s));
        for (long k = 0; k < n; ++k, ++next) {
          Map<String, Object> r = Json.obj(records.get(next));
          TensorInfo info = info(r);
          TdumpWriter.WriteResult res;
          if (r.get("kind").equals("summary")) {
            res = w.writeSummary(info, summary(Json.obj(r.get("summary"))));
          } else {
            res = w.write(info, ByteBuffer.wrap(bytes, (int) Json.lng(r.get("payload_offset")), (int) Json.lng(r.get("payload_length"))));
          }
          Check.eq(TdumpWriter.Status.WRITTEN, res.status, info.name() + " written");
          Check.eq(Json.lng(r.get("offset")), res.offset, info.name() + " offset");
        }
        if (s + 1 == sessions.size() && !closed) {
          w.flush();
          stillOpen = w;
          break;
        }
        w.close();
      }
      byte[] made = Files.readAllBytes(out);
      if (stillOpen != null) stillOpen.close();
      Check.eq(bytes.length, made.length, "reproduced size");
      for (int i = 0; i < made.length; ++i) {
        if (made[i] != bytes[i]) throw new AssertionError("reproduced file differs first at byte " + i);
      }
    } finally {
      Files.deleteIfExists(out);
    }
  }

  /** §3.6: the SUMMARY of summary_checked.tdump is recomputed from the TENSOR's values. */
  private static void summaryIsRecomputable(Path vectors) throws Exception {
    try (TdumpReader r = TdumpReader.open(vectors.resolve("valid/summary_checked.tdump"))) {
      Record values = r.records().get(0);
      Summary stored = r.records().get(1).summary();
      Summary mine = Summary.of(Values.decode(values), stored.projectionSeed, stored.projection.length);
      Check.eq(stored.count, mine.count, "count");
      Check.eq(stored.nanCount, mine.nanCount, "nan_count");
      Check.eq(stored.posinfCount, mine.posinfCount, "posinf_count");
      Check.eq(stored.neginfCount, mine.neginfCount, "neginf_count");
      Check.eq(stored.zeroCount, mine.zeroCount, "zero_count");
      Check.same(stored.min, mine.min, "min");
      Check.same(stored.max, mine.max, "max");
      Check.that(java.util.Arrays.equals(stored.projection, mine.projection), "projection bit for bit");
      Check.that(Math.abs(stored.mean - mine.mean) <= 1e-12 * Math.abs(stored.mean), "mean to 1e-12");
      Check.that(Math.abs(stored.std - mine.std) <= 1e-12 * Math.abs(stored.std), "std to 1e-12");
      Check.that(Math.abs(stored.l2Norm - mine.l2Norm) <= 1e-12 * Math.abs(stored.l2Norm), "l2_norm to 1e-12");
    }
  }
}

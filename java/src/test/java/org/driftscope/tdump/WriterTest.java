package org.driftscope.tdump;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

/**
 * The writer: numbering, filters and budgets, the limits it refuses exactly as a reader would,
 * append (§5), and that every prefix of a file (what a killed writer leaves) reads back as the
 * complete records before the cut.
 */
public final class WriterTest {
  static Path dir;

  static Path tmp(String name) {
    return dir.resolve(name);
  }

  public static void main(String[] args) throws Exception {
    dir = Files.createTempDirectory("tdump_java_writer_");
    try {
      numberingAndFilters();
      refusals();
      append();
      everyPrefixRecovers();
      summaries();
      Check.done("WriterTest");
    } finally {
      try (java.util.stream.Stream<Path> s = Files.walk(dir)) {
        s.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }

  static float[] floats(int n, float base) {
    float[] v = new float[n];
    for (int i = 0; i < n; ++i) v[i] = base + i;
    return v;
  }

  static void numberingAndFilters() throws Exception {
    Path p = tmp("filtered.tdump");
    TdumpWriter.Options opt = new TdumpWriter.Options().filter("-*.skip budget=40").meta("run", "a");
    try (TdumpWriter w = TdumpWriter.create(p, opt)) {
      Check.eq(TdumpWriter.Status.WRITTEN, w.write(new TensorInfo("a", DType.F32, 2), floats(2, 0)).status, "a");
      TdumpWriter.WriteResult skipped = w.write(new TensorInfo("b.skip", DType.F32, 2), floats(2, 0));
      Check.eq(TdumpWriter.Status.FILTERED, skipped.status, "b.skip filtered");
      Check.eq(1L, skipped.execIndex, "a filtered tensor consumes its exec_index");
      Check.that(!w.wants("c.skip") && w.wants("c"), "wants() applies the name clauses");
      TdumpWriter.WriteResult a1 = w.write(new TensorInfo("a", DType.F32, 2), floats(2, 10));
      Check.eq(2L, a1.execIndex, "exec_index continues");
      Check.eq(1L, a1.occurrence, "second call of a is occurrence 1");
      TdumpWriter.WriteResult big = w.write(new TensorInfo("big", DType.F32, 8), floats(8, 0));
      Check.eq(TdumpWriter.Status.OVER_BUDGET, big.status, "32 + 16 > 40 bytes");
      Check.eq(TdumpWriter.Status.OVER_BUDGET, w.write(new TensorInfo("tiny", DType.U8, 1), new byte[1]).status,
          "after the budget nothing more is recorded (a prefix of the run)");
      TdumpWriter.WriteResult explicit = w.write(new TensorInfo("x", DType.F32, 1).execIndex(100).occurrence(7), floats(1, 0));
      Check.eq(100L, explicit.execIndex, "explicit exec_index");
    }
    try (TdumpReader r = TdumpReader.open(p)) {
      Check.eq(Integrity.State.CLEAN, r.integrity().state(), "clean");
      List<Record> recs = r.records();
      Check.eq(2, recs.size(), "two records written");
      Check.eq("a", r.header().get("run"), "metadata");
      Check.eq("driftscope " + TdumpWriter.VERSION + " (java)", r.header().get("writer"), "writer key added");
      Check.eq(1L, r.find("a", 1, Role.OUTPUT, 0).info().occurrence(), "find occurrence 1");
      Check.eq(2L, r.find("a", 1, Role.OUTPUT, 0).info().execIndex(), "its exec_index");
      Check.that(Arrays.equals(new double[] {10, 11}, Values.decode(r.find("a", 1, Role.OUTPUT, 0))), "values");
      Check.that(r.find("b.skip") == null && r.find("nope") == null, "absent names");
    }
    // Payloads stream from any ByteBuffer, direct or not, and its position is left alone.
    Path q = tmp("buffers.tdump");
    try (TdumpWriter w = TdumpWriter.create(q, new TdumpWriter.Options().syncEvery(24))) {
      ByteBuffer d = ByteBuffer.allocateDirect(16).order(ByteOrder.LITTLE_ENDIAN);
      d.putInt(0, 7).putInt(4, 8).putInt(8, 9).putInt(12, 10);
      w.write(new TensorInfo("d", DType.I32, 2, 2), d);
      Check.eq(0, d.position(), "position unchanged");
      w.write(new TensorInfo("h", DType.I16, 2), ByteBuffer.wrap(new byte[] {0, 0, 1, 2, 3, 4, 0, 0}, 2, 4));
    }
    try (TdumpReader r = TdumpReader.open(q)) {
      Check.that(Arrays.equals(new double[] {7, 8, 9, 10}, Values.decode(r.find("d"))), "direct buffer");
      Check.that(Arrays.equals(new double[] {0x201, 0x403}, Values.decode(r.find("h"))), "buffer slice");
    }
  }

  static void refusals() throws Exception {
    Path p = tmp("refusals.tdump");
    TdumpWriter w = TdumpWriter.create(p);
    Object[][] cases = {
      {ErrorCode.EMPTY_NAME, new TensorInfo("", DType.F32, 1)},
      {ErrorCode.LIMIT_EXCEEDED, new TensorInfo(new String(new char[4097]).replace('\0', 'n'), DType.F32, 1)},
      {ErrorCode.BAD_UTF8, new TensorInfo("bad\ud800", DType.F32, 1)},
      {ErrorCode.LIMIT_EXCEEDED, new TensorInfo("r", DType.F32, new long[17])},
      {ErrorCode.BAD_AXES, new TensorInfo("ax", DType.F32, 1).axes("a", "b")},
      {ErrorCode.BAD_AXES, new TensorInfo("ax", DType.F32, 1).axes("a,b")},
      {ErrorCode.DUPLICATE_KEY, new TensorInfo("at", DType.F32, 1).attr("k", "1").attr("k", "2")},
      {ErrorCode.LIMIT_EXCEEDED, new TensorInfo("at", DType.F32, 1).attr("", "1")},
      {ErrorCode.BAD_ENCODING, new TensorInfo("q", DType.F32, 1).encoding(Encoding.affineTensor(1, 0))},
      {ErrorCode.BAD_VALUE, new TensorInfo("q", DType.I8, 1).encoding(Encoding.affineTensor(Double.NaN, 0))},
      {ErrorCode.BAD_ENCODING, new TensorInfo("q", DType.I8, 2).encoding(Encoding.affineChannel(1, new double[] {1}, new long[] {0}))},
      {ErrorCode.BAD_ENCODING, new TensorInfo("q", DType.I8, 2).encoding(Encoding.affineChannel(0, new double[] {1}, new long[] {0}))},
      {ErrorCode.SHAPE_OVERFLOW, new TensorInfo("s", DType.F32, 1L << 62, 8)},
      {ErrorCode.SHAPE_OVERFLOW, new TensorInfo("s", DType.F32, 0, 1L << 62, 8)},
      {ErrorCode.LIMIT_EXCEEDED, new TensorInfo("s", DType.F32, 0, 1L << 47)},
    };
    for (Object[] c : cases) {
      TensorInfo t = (TensorInfo) c[1];
      Check.fails((ErrorCode) c[0], () -> w.write(t, new byte[4]), "refuses " + t);
    }
    TdumpException e = Check.fails(ErrorCode.LENGTH_MISMATCH, () -> w.write(new TensorInfo("x", DType.F32, 2), new byte[4]), "payload length");
    Check.eq("payload of 'x' is 4 bytes, but 2 f32 elements need 8", e.getMessage(), "message");
    w.write(new TensorInfo("ok", DType.F32, 1), new float[] {1});
    w.close();
    w.close();  // idempotent
    Check.fails(ErrorCode.CLOSED, () -> w.write(new TensorInfo("late", DType.F32, 1), new float[] {1}), "write after close");
    try (TdumpReader r = TdumpReader.open(p)) {
      Check.eq(1, r.records().size(), "refused tensors left no trace");
      Check.eq(Integrity.State.CLEAN, r.integrity().state(), "clean");
    }
    Check.fails(ErrorCode.DUPLICATE_KEY, () -> TdumpWriter.create(tmp("m.tdump"), new TdumpWriter.Options().meta("k", "1").meta("k", "2")), "metadata key twice");
    Check.fails(ErrorCode.FILTER_SYNTAX, () -> TdumpWriter.create(tmp("f.tdump"), new TdumpWriter.Options().filter("rank<=x")), "bad filter");
    Check.fails(ErrorCode.INVALID_ARGUMENT, () -> TdumpWriter.create(tmp("s.tdump"), new TdumpWriter.Options().syncEvery(0)), "sync bytes 0");
    Check.fails(ErrorCode.IO_ERROR, () -> TdumpWriter.create(dir), "a directory is not a file to write");
    Check.fails(ErrorCode.IO_ERROR, () -> TdumpWriter.create(p, new TdumpWriter.Options().overwrite(false)), "overwrite(false)");
    Check.fails(ErrorCode.IO_ERROR, () -> TdumpReader.open(dir), "a directory is not a file to read");
    Check.fails(ErrorCode.IO_ERROR, () -> TdumpReader.open(tmp("missing.tdump")), "a missing file");
    Path link = tmp("link.tdump");
    Files.createSymbolicLink(link, p);
    try (TdumpReader r = TdumpReader.open(link)) {
      Check.eq(1, r.records().size(), "a symbolic link to a dump reads as the dump");
    }
    Path fifo = tmp("fifo");
    if (new ProcessBuilder("mkfifo", fifo.toString()).start().waitFor() == 0) {
      TdumpException x = Check.fails(ErrorCode.IO_ERROR, () -> TdumpReader.open(fifo), "a FIFO is refused without blocking");
      Check.that(x.getMessage().contains("not a regular file"), x.getMessage());
    }
  }

  static void append() throws Exception {
    Path p = tmp("append.tdump");
    try (TdumpWriter w = TdumpWriter.create(p, new TdumpWriter.Options().meta("note", "first"))) {
      w.write(new TensorInfo("step", DType.F32, 1), new float[] {1});
      w.write(new TensorInfo("other", DType.I32, 1).execIndex(5), new int[] {2});
    }
    try (TdumpWriter w = TdumpWriter.create(p, new TdumpWriter.Options().append(true).meta("ignored", "x"))) {
      TdumpWriter.WriteResult r = w.write(new TensorInfo("step", DType.F32, 1), new float[] {3});
      Check.eq(6L, r.execIndex, "exec_index continues after the largest in the file");
      Check.eq(1L, r.occurrence, "occurrence continues");
    }
    try (TdumpReader r = TdumpReader.open(p)) {
      Check.eq(Integrity.State.CLEAN, r.integrity().state(), "appended file is clean");
      Check.eq(3, r.records().size(), "three records");
      Check.eq("first", r.header().get("note"), "metadata kept");
      Check.eq(null, r.header().get("ignored"), "append keeps the header");
    }
    // A torn tail is dropped by append; a corrupt file is refused.
    byte[] whole = Files.readAllBytes(p);
    long firstEnd;
    try (TdumpReader r = TdumpReader.open(p)) {
      firstEnd = r.records().get(1).offset() + r.records().get(1).size();
    }
    Files.write(p, Arrays.copyOf(whole, (int) firstEnd + 30));
    try (TdumpWriter w = TdumpWriter.create(p, new TdumpWriter.Options().append(true))) {
      w.write(new TensorInfo("after_cut", DType.F32, 1), new float[] {4});
    }
    try (TdumpReader r = TdumpReader.open(p)) {
      Check.eq(Integrity.State.CLEAN, r.integrity().state(), "cut tail removed");
      Check.eq(3, r.records().size(), "two kept + one appended");
      Check.eq("after_cut", r.records().get(2).name(), "appended after the cut");
    }
    byte[] bad = Files.readAllBytes(p);
    try (TdumpReader r = TdumpReader.open(p)) {
      bad[(int) r.records().get(0).payloadOffset()] ^= 1;
    }
    Files.write(p, bad);
    TdumpException e = Check.fails(ErrorCode.BAD_RECORD_CHECKSUM, () -> TdumpWriter.create(p, new TdumpWriter.Options().append(true)), "corrupt file");
    Check.that(e.getMessage().startsWith("cannot append to a damaged file: "), e.getMessage());
  }

  /** §4: a file cut at any byte keeps every complete record before the cut. */
  static void everyPrefixRecovers() throws Exception {
    Path p = tmp("prefix.tdump");
    long[] ends = new long[4];
    int header;
    TdumpWriter w = TdumpWriter.create(p, new TdumpWriter.Options().salt(1));
    for (int i = 0; i < 4; ++i) {
      w.write(new TensorInfo("r" + i, DType.F32, 3 + 5 * i).attr("i", "" + i), floats(3 + 5 * i, i));
      ends[i] = w.bytesWritten();
    }
    w.flush();
    byte[] full = Files.readAllBytes(p);
    w.close();
    try (TdumpReader r = TdumpReader.open(p)) {
      header = r.header().headerLength();
    }
    for (int cut = 0; cut <= full.length; ++cut) {
      byte[] b = Arrays.copyOf(full, cut);
      if (cut < header) {
        Check.fails(ErrorCode.TRUNCATED_HEADER, () -> TdumpReader.fromBytes(b), "cut in the header at " + cut);
        continue;
      }
      TdumpReader r = TdumpReader.fromBytes(b);
      int complete = 0;
      while (complete < 4 && ends[complete] <= cut) complete++;
      Check.eq(complete, r.records().size(), "records before a cut at " + cut);
      boolean atBoundary = cut == header || (complete > 0 && ends[complete - 1] == cut);
      Check.eq(atBoundary ? Integrity.State.UNFINISHED : Integrity.State.CUT, r.integrity().state(), "state at " + cut);
    }
  }

  static void summaries() throws Exception {
    Path p = tmp("summary.tdump");
    double[] x = {1.5, -2, 0, Double.NaN, Double.POSITIVE_INFINITY, 3};
    Summary s = Summary.of(x, 0x5DEECE66DL, 4);
    try (TdumpWriter w = TdumpWriter.create(p)) {
      w.writeSummary(new TensorInfo("light", DType.F64, 2, 3).opType("Linear"), s);
      Summary wrong = Summary.of(x, 1, 4);
      Check.fails(ErrorCode.BAD_VALUE, () -> w.writeSummary(new TensorInfo("light", DType.F64, 7), wrong), "count != numel");
      wrong.projection = new float[4097];
      Check.fails(ErrorCode.LIMIT_EXCEEDED, () -> w.writeSummary(new TensorInfo("light", DType.F64, 2, 3), wrong), "projection_dim");
    }
    try (TdumpReader r = TdumpReader.open(p)) {
      Record rec = r.records().get(0);
      Check.eq(Record.Kind.SUMMARY, rec.kind(), "summary record");
      Summary got = rec.summary();
      Check.eq(6L, got.count, "count");
      Check.eq(1L, got.nanCount, "nan");
      Check.eq(1L, got.posinfCount, "+inf");
      Check.eq(1L, got.zeroCount, "zero");
      Check.same(-2, got.min, "min");
      Check.same(3, got.max, "max");
      Check.same(0.625, got.mean, "mean");
      Check.that(Arrays.equals(s.projection, got.projection), "projection");
      Check.fails(ErrorCode.INVALID_ARGUMENT, () -> Values.decode(rec), "a summary has no values");
    }
  }
}

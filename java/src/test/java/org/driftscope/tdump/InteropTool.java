package org.driftscope.tdump;

import java.io.PrintStream;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * The Java side of the cross-language tests (tests/python/test_java.py):
 *
 * <pre>
 *   InteropTool dtypes OUT SALT   one tensor per dtype (the tensors test_java.py also writes with
 *                                 the Python writer: the two files must be byte-identical)
 *   InteropTool finite OUT SALT   every dtype with finite values only (what `driftscope compare` can
 *                                 call identical: it counts NaN against NaN as a mismatch)
 *   InteropTool crash OUT         writes records with sync-per-record forever, printing
 *                                 "durable INDEX OFFSET" after each write returns (for SIGKILL)
 *   InteropTool filter            stdin: "T\tname\top\trole\tdtype\tdims\texec" tensors, then
 *                                 "F\tHEX" filters (UTF-8 in hex); per filter one line:
 *                                 "ok\tCANONICAL\tBUDGET\tBITS" (accepts() per tensor) or "error\tMESSAGE"
 *   InteropTool verdict FILE...   per file one line: state or error code, offset, message (tab-separated)
 * </pre>
 */
public final class InteropTool {
  private InteropTool() {}

  public static void main(String[] args) throws Exception {
    try {
      switch (args[0]) {
        case "dtypes":
          dtypes(Paths.get(args[1]), Long.parseUnsignedLong(args[2]));
          break;
        case "finite":
          finite(Paths.get(args[1]), Long.parseUnsignedLong(args[2]));
          break;
        case "crash":
          crash(Paths.get(args[1]));
          break;
        case "filter":
          filter();
          break;
        case "verdict":
          for (int i = 1; i < args.length; ++i) verdict(Paths.get(args[i]));
          break;
        default:
          throw new IllegalArgumentException("unknown command " + args[0]);
      }
    } catch (TdumpException e) {
      System.err.println("error: " + e);
      System.exit(2);
    }
  }

  static void filter() throws java.io.IOException {
    java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in, java.nio.charset.StandardCharsets.UTF_8));
    java.util.List<TensorInfo> tensors = new java.util.ArrayList<>();
    java.util.List<Long> execs = new java.util.ArrayList<>();
    StringBuilder out = new StringBuilder();
    for (String line; (line = in.readLine()) != null; ) {
      String[] f = line.split("\t", -1);
      if (f[0].equals("T")) {
        String[] d = f[5].isEmpty() ? new String[0] : f[5].split(",");
        long[] dims = new long[d.length];
        for (int i = 0; i < d.length; ++i) dims[i] = Long.parseUnsignedLong(d[i]);
        tensors.add(new TensorInfo(f[1], DType.parse(f[4]), dims).opType(f[2]).role(Role.parse(f[3])));
        execs.add(Long.parseUnsignedLong(f[6]));
        continue;
      }
      byte[] b = new byte[f[1].length() / 2];
      for (int i = 0; i < b.length; ++i) b[i] = (byte) Integer.parseInt(f[1].substring(2 * i, 2 * i + 2), 16);
      try {
        Filter flt = Filter.parse(new String(b, java.nio.charset.StandardCharsets.UTF_8));
        StringBuilder bits = new StringBuilder();
        for (int i = 0; i < tensors.size(); ++i) bits.append(flt.accepts(tensors.get(i), execs.get(i)) ? '1' : '0');
        out.append("ok\t").append(flt).append('\t').append(flt.byteBudget() < 0 ? "-" : Long.toUnsignedString(flt.byteBudget()))
            .append('\t').append(bits).append('\n');
      } catch (TdumpException e) {
        out.append("error\t").append(e.getMessage()).append('\n');
      }
    }
    System.out.print(out);
  }

  /** What the reader says about a file, for comparison with the C++ reader's words. */
  static void verdict(Path file) {
    String line;
    try (TdumpReader r = TdumpReader.open(file)) {
      TdumpException c = r.integrity().corruption();
      line = c == null ? r.integrity().state() + "\t-\t-" : "corrupt:" + c.code().codeName() + "\t" + c.offset() + "\t" + c.getMessage();
    } catch (TdumpException e) {
      line = "error:" + e.code().codeName() + "\t" + e.offset() + "\t" + e.getMessage();
    }
    System.out.println(file.getFileName() + "\t" + line);
  }

  static byte[] codes() {
    byte[] b = new byte[256];
    for (int i = 0; i < 256; ++i) b[i] = (byte) i;
    return b;
  }

  static void dtypes(Path out, long salt) throws TdumpException {
    TdumpWriter.Options opt = new TdumpWriter.Options().salt(salt).meta("framework", "interop")
        .meta("writer", "interop-test").meta("device", "jvm");
    try (TdumpWriter w = TdumpWriter.create(out, opt)) {
      w.write(new TensorInfo("t.f64", DType.F64, 8), new double[] {0.0, -0.0, 1.5, -1e308, 4.9e-324,
        Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, Double.NaN});
      w.write(new TensorInfo("t.f32", DType.F32, 2, 4).opType("Linear").axes("batch", "hidden").attr("bias", "true")
          .attr("note", "ünïcödé ✓"), new float[] {1.0f, -2.5f, 3.4028235e38f, 1e-45f, Float.POSITIVE_INFINITY, Float.NaN, -0.0f, 0.1f});
      w.write(new TensorInfo("t.f16", DType.F16, 8), new short[] {0x0000, (short) 0x8000, 0x0001, 0x3c00, 0x7bff, 0x7c00, (short) 0xfc00, 0x7e00});
      w.write(new TensorInfo("t.bf16", DType.BF16, 8), new short[] {0x3F80, (short) 0xC000, 0x7F80, (short) 0xFF80, 0x7FC0, 0x0001, 0x4049, 0});
      w.write(new TensorInfo("t.f8e4m3fn", DType.F8E4M3FN, 16, 16).axes("hi", "lo"), codes());
      w.write(new TensorInfo("t.f8e5m2", DType.F8E5M2, 256), codes());
      w.write(new TensorInfo("t.i64", DType.I64, 4), new long[] {Long.MIN_VALUE, -1, 0, Long.MAX_VALUE});
      w.write(new TensorInfo("t.i32", DType.I32, 4), new int[] {Integer.MIN_VALUE, -1, 0, Integer.MAX_VALUE});
      w.write(new TensorInfo("t.i16", DType.I16, 4), new short[] {Short.MIN_VALUE, -1, 0, Short.MAX_VALUE});
      w.write(new TensorInfo("t.i8", DType.I8, 4), new byte[] {-128, -1, 0, 127});
      w.write(new TensorInfo("t.u8", DType.U8, 4), new byte[] {0, 1, (byte) 128, (byte) 255});
      w.write(new TensorInfo("t.bool", DType.BOOL, 3), new byte[] {1, 0, 1});
      w.write(new TensorInfo("t.u16", DType.U16, 3), new short[] {0, 1, (short) 65535});
      w.write(new TensorInfo("t.u32", DType.U32, 3), new int[] {0, 1, -1});
      w.write(new TensorInfo("t.u64", DType.U64, 3), new long[] {0, 1, -1});
      w.write(new TensorInfo("q.per_tensor", DType.I8, 2, 3).opType("QuantizeLinear").encoding(Encoding.affineTensor(0.05, -3)),
          new byte[] {-128, -3, 0, 17, 100, 127});
      w.write(new TensorInfo("q.per_channel", DType.U8, 2, 3).encoding(
          Encoding.affineChannel(1, new double[] {0.5, 0.25, 0.125}, new long[] {128, 0, 255})),
          new byte[] {0, 1, 2, (byte) 128, (byte) 255, (byte) 255});
      w.write(new TensorInfo("block", DType.F32, 2).role(Role.INPUT), new float[] {1, 2});
      w.write(new TensorInfo("block.weight", DType.F32, 2).role(Role.PARAMETER).opType("Parameter"), new float[] {3, 4});
      w.write(new TensorInfo("block", DType.F32, 2), new float[] {5, 6});
      w.write(new TensorInfo("block", DType.F32, 2), new float[] {7, 8});  // occurrence 1
      w.write(new TensorInfo("scalar", DType.F32), new float[] {0.5f});
      w.write(new TensorInfo("empty", DType.F32, 3, 0), new float[0]);
    }
  }

  static void finite(Path out, long salt) throws TdumpException {
    byte[] fp8 = new byte[120];  // codes 0..119: finite in both fp8 formats
    for (int i = 0; i < fp8.length; ++i) fp8[i] = (byte) i;
    try (TdumpWriter w = TdumpWriter.create(out, new TdumpWriter.Options().salt(salt).meta("writer", "interop-test"))) {
      w.write(new TensorInfo("f.f64", DType.F64, 5), new double[] {0.0, -0.0, 1.5, -1e300, 4.9e-324});
      w.write(new TensorInfo("f.f32", DType.F32, 2, 4).opType("Linear").axes("batch", "hidden"),
          new float[] {1.0f, -2.5f, 3.4028235e38f, 1e-45f, 0.1f, -0.0f, 7f, 8f});
      w.write(new TensorInfo("f.f16", DType.F16, 5), new short[] {0x0000, (short) 0x8000, 0x0001, 0x3c00, 0x7bff});
      w.write(new TensorInfo("f.bf16", DType.BF16, 4), new short[] {0x3F80, (short) 0xC000, 0x0001, 0x4049});
      w.write(new TensorInfo("f.f8e4m3fn", DType.F8E4M3FN, 120), fp8);
      w.write(new TensorInfo("f.f8e5m2", DType.F8E5M2, 120), fp8);
      w.write(new TensorInfo("f.i64", DType.I64, 4), new long[] {Long.MIN_VALUE, -1, 0, Long.MAX_VALUE});
      w.write(new TensorInfo("f.i32", DType.I32, 4), new int[] {Integer.MIN_VALUE, -1, 0, Integer.MAX_VALUE});
      w.write(new TensorInfo("f.i16", DType.I16, 4), new short[] {Short.MIN_VALUE, -1, 0, Short.MAX_VALUE});
      w.write(new TensorInfo("f.i8", DType.I8, 4), new byte[] {-128, -1, 0, 127});
      w.write(new TensorInfo("f.u8", DType.U8, 4), new byte[] {0, 1, (byte) 128, (byte) 255});
      w.write(new TensorInfo("f.bool", DType.BOOL, 3), new byte[] {1, 0, 1});
      w.write(new TensorInfo("f.u16", DType.U16, 3), new short[] {0, 1, (short) 65535});
      w.write(new TensorInfo("f.u32", DType.U32, 3), new int[] {0, 1, -1});
      w.write(new TensorInfo("f.u64", DType.U64, 3), new long[] {0, 1, -1});
      w.write(new TensorInfo("f.q", DType.I8, 2, 3).encoding(Encoding.affineTensor(0.05, -3)), new byte[] {-128, -3, 0, 17, 100, 127});
    }
  }

  /** Sync-per-record writes until killed; a line per record whose write() returned. */
  static void crash(Path out) throws TdumpException {
    PrintStream o = System.out;
    TdumpWriter.Options opt = new TdumpWriter.Options().salt(0x5EED).sync(TdumpWriter.SyncPolicy.EVERY_RECORD);
    try (TdumpWriter w = TdumpWriter.create(out, opt)) {
      for (int i = 0; i < 1_000_000; ++i) {
        float[] v = new float[crashSize(i)];
        for (int k = 0; k < v.length; ++k) v[k] = i * 1000 + k * 0.25f;
        TdumpWriter.WriteResult r = w.write(new TensorInfo("layer." + i, DType.F32, v.length).opType("Step"), v);
        o.println("durable " + i + " " + r.offset);
        o.flush();
      }
    }
  }

  /** Element count of crash record i (varied, so records end at many different offsets). */
  static int crashSize(int i) {
    return 1000 + (i * 7919) % 20000;
  }
}

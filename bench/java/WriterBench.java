// Java TdumpWriter throughput against a plain FileChannel.write of the same bytes (issue 14):
// the same number of bytes per record in the same gathered write from direct buffers, without
// the record encoding, validation and CRC-32 the writer adds. Both write to the same folder with sync on close; runs alternate
// and the best of nine of each is kept (robust to a busy machine). Prints MB/s and the ratio writer / plain (target >= 0.8).
//   bench/java/run.sh [DIR]
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import org.driftscope.tdump.DType;
import org.driftscope.tdump.TdumpException;
import org.driftscope.tdump.TdumpWriter;
import org.driftscope.tdump.TensorInfo;

public final class WriterBench {
  static long writer(Path p, ByteBuffer payload, int records, int elems) throws TdumpException {
    // The producer's descriptors exist before the writer sees them (a hook builds them anyway).
    TensorInfo[] infos = new TensorInfo[records];
    for (int i = 0; i < records; ++i) infos[i] = new TensorInfo("encoder.layers." + i + ".mlp", DType.F32, 1, elems).opType("Linear");
    long t0 = System.nanoTime();
    try (TdumpWriter w = TdumpWriter.create(p, new TdumpWriter.Options().salt(1))) {
      for (int i = 0; i < records; ++i) w.write(infos[i], payload);
    }
    return System.nanoTime() - t0;
  }

  /** The same bytes: per record a head of the writer's size, the payload, the padding; one force at the end. */
  static long plain(Path p, ByteBuffer payload, int records, int headBytes, int tailBytes, int fileHead) throws IOException {
    long t0 = System.nanoTime();
    try (FileChannel ch = FileChannel.open(p, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
        StandardOpenOption.TRUNCATE_EXISTING)) {
      ch.write(ByteBuffer.allocate(fileHead));
      // Direct buffers, as a hand-written writer would use (heap buffers cost a copy per write).
      ByteBuffer head = ByteBuffer.allocateDirect(headBytes);
      ByteBuffer tail = ByteBuffer.allocateDirect(tailBytes);
      for (int i = 0; i < records; ++i) {
        ByteBuffer[] pieces = {head.duplicate(), payload.duplicate(), tail.duplicate()};
        long want = headBytes + payload.remaining() + tailBytes;
        while (want > 0) want -= ch.write(pieces);
      }
      ch.write(ByteBuffer.allocate(64 + 128 + 24 * records + 4 * Integer.highestOneBit(Math.max(1, 2 * records - 1)) * 2));
      ch.force(false);
    }
    return System.nanoTime() - t0;
  }

  static void run(Path dir, String label, int records, int elems) throws Exception {
    ByteBuffer payload = ByteBuffer.allocateDirect(4 * elems).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < elems; ++i) payload.putFloat(4 * i, i * 0.5f);
    Path a = dir.resolve("bench_writer.tdump");
    Path b = dir.resolve("bench_plain.bin");
    writer(a, payload, Math.min(records, 4), elems);  // warm up the JIT
    long size = Files.size(a);
    int fileHead = 128;
    long recordLen = (size - fileHead) / 4;  // approximate: INDEX/END are small next to a record
    int headBytes = 128;
    int tail = (int) ((64 - (4L * elems) % 64) % 64);
    long bestW = Long.MAX_VALUE;
    long bestP = Long.MAX_VALUE;
    for (int rep = 0; rep < 9; ++rep) {
      bestW = Math.min(bestW, writer(a, payload, records, elems));
      bestP = Math.min(bestP, plain(b, payload, records, headBytes, tail, fileHead));
    }
    long bytes = Files.size(a);
    long plainBytes = Files.size(b);
    double mbW = bytes / 1e6 / (bestW / 1e9);
    double mbP = plainBytes / 1e6 / (bestP / 1e9);
    System.out.printf("%-28s writer %8.0f MB/s   plain FileChannel.write %8.0f MB/s   ratio %.2f   (%d vs %d bytes, record ~%d)%n",
        label, mbW, mbP, mbW / mbP, bytes, plainBytes, recordLen);
    Files.deleteIfExists(a);
    Files.deleteIfExists(b);
  }

  public static void main(String[] args) throws Exception {
    Path dir = Paths.get(args.length > 0 ? args[0] : System.getProperty("java.io.tmpdir"));
    run(dir, "64 records x 4 MiB f32", 64, 1 << 20);
    run(dir, "4096 records x 16 KiB f32", 4096, 4096);
  }
}

// A toy on-device engine with forward hooks, recording every module's output into a .tdump with
// the JDK-only driftscope Java library (docs/howto/android.md). On Android the same code runs in
// the app; here it runs on the desktop JVM:
//   java -cp build/java/driftscope-tdump.jar:build/android ToyEngine phone.tdump
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import org.driftscope.tdump.DType;
import org.driftscope.tdump.TdumpException;
import org.driftscope.tdump.TdumpWriter;
import org.driftscope.tdump.TensorInfo;

/** The engine's module interface: a named layer with a forward pass over a [1, n] activation. */
interface Module {
  String opType();

  float[] forward(float[] x);
}

/** Called after each module's forward pass, as PyTorch's register_forward_hook. */
interface ForwardHook {
  void after(String path, Module module, float[] output) throws TdumpException;
}

final class Linear implements Module {
  final int in;
  final int out;
  final float[] weight;  // [out, in], row-major like torch.nn.Linear.weight
  final float[] bias;

  Linear(int in, int out, int seed) {
    this.in = in;
    this.out = out;
    weight = new float[out * in];
    bias = new float[out];
    // Dyadic weights: every product and sum below is exact in f32, so the engine and PyTorch
    // agree bit for bit (a real engine would load them from the exported model).
    for (int i = 0; i < weight.length; ++i) weight[i] = ((i * 5 + seed) % 9 - 4) / 8f;
    for (int o = 0; o < out; ++o) bias[o] = ((o + seed) % 5 - 2) / 4f;
  }

  public String opType() {
    return "Linear";
  }

  public float[] forward(float[] x) {
    float[] y = new float[out];
    for (int o = 0; o < out; ++o) {
      float s = 0;
      for (int i = 0; i < in; ++i) s += weight[o * in + i] * x[i];
      y[o] = s + bias[o];
    }
    return y;
  }
}

final class ReLU implements Module {
  public String opType() {
    return "ReLU";
  }

  public float[] forward(float[] x) {
    float[] y = x.clone();
    for (int i = 0; i < y.length; ++i) y[i] = Math.max(0f, y[i]);
    return y;
  }
}

/** A sequential model: children run in order, hooks fire after each child and after the root. */
final class ToyNet implements Module {
  final List<String> names = new ArrayList<>();
  final List<Module> children = new ArrayList<>();
  final List<ForwardHook> hooks = new ArrayList<>();

  ToyNet add(String name, Module m) {
    names.add(name);
    children.add(m);
    return this;
  }

  public String opType() {
    return "ToyNet";
  }

  public float[] forward(float[] x) {
    try {
      for (int i = 0; i < children.size(); ++i) {
        x = children.get(i).forward(x);
        for (ForwardHook h : hooks) h.after(names.get(i), children.get(i), x);
      }
      for (ForwardHook h : hooks) h.after("<root>", this, x);
      return x;
    } catch (TdumpException e) {
      throw new IllegalStateException(e.toString(), e);
    }
  }
}

/** The recorder: one hook that writes each module output as a TENSOR record. */
final class TdumpHook implements ForwardHook, AutoCloseable {
  private final TdumpWriter writer;

  TdumpHook(String path) throws TdumpException {
    writer = TdumpWriter.create(Paths.get(path), new TdumpWriter.Options()
        .meta("framework", "toy-engine 1.0").meta("backend", "cpu").meta("device", "pixel-8"));
  }

  @Override
  public void after(String path, Module module, float[] output) throws TdumpException {
    if (!writer.wants(path)) return;  // a filtered name costs no copy
    TensorInfo info = new TensorInfo(path, DType.F32, 1, output.length).opType(module.opType());
    writer.write(info, output);
  }

  @Override
  public void close() throws TdumpException {
    writer.close();  // writes the footer index; a killed app still leaves a readable prefix
  }
}

public final class ToyEngine {
  public static void main(String[] args) throws TdumpException {
    ToyNet net = new ToyNet().add("fc1", new Linear(4, 8, 1)).add("act", new ReLU()).add("fc2", new Linear(8, 2, 3));
    try (TdumpHook hook = new TdumpHook(args[0])) {
      net.hooks.add(hook);
      float[] y = net.forward(new float[] {0.5f, -1f, 0.25f, 2f});
      System.out.println("output " + y[0] + " " + y[1] + " -> " + args[0]);
    }
  }
}

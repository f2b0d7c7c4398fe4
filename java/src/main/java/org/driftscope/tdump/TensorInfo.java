package org.driftscope.tdump;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * Describes a tensor (docs/format.md §3.3): what a producer passes to {@link TdumpWriter#write}
 * and what {@link TdumpReader} returns for each record. Setters return {@code this}.
 *
 * <pre>{@code
 * new TensorInfo("encoder.layers.0.mlp", DType.F32, 1, 128, 384)
 *     .opType("Linear").axes("batch", "seq", "hidden").attr("bias", "true");
 * }</pre>
 */
public final class TensorInfo {
  /** {@link #execIndex()} default: the writer numbers offered tensors 0, 1, 2, … (u64 ~0). */
  public static final long AUTO_INDEX = -1L;
  /** {@link #occurrence()} default: the writer counts the calls of each identity (u32 ~0). */
  public static final long AUTO_OCCURRENCE = 0xFFFFFFFFL;

  private String name = "";
  private String opType = "";
  private Role role = Role.OUTPUT;
  private int roleIndex;
  private long execIndex = AUTO_INDEX;
  private long occurrence = AUTO_OCCURRENCE;
  private DType dtype = DType.F32;
  private long[] shape = new long[0];
  private List<String> axes = new ArrayList<>();
  private List<String[]> attrs = new ArrayList<>();
  private Encoding encoding = Encoding.raw();

  public TensorInfo() {}

  public TensorInfo(String name, DType dtype, long... shape) {
    this.name = name;
    this.dtype = dtype;
    this.shape = shape.clone();
  }

  /** A copy (the writer resolves indices on a copy, never on the caller's object). */
  public TensorInfo copy() {
    TensorInfo t = new TensorInfo(name, dtype, shape);
    t.opType = opType;
    t.role = role;
    t.roleIndex = roleIndex;
    t.execIndex = execIndex;
    t.occurrence = occurrence;
    t.axes = new ArrayList<>(axes);
    t.attrs = new ArrayList<>();
    for (String[] kv : attrs) t.attrs.add(kv.clone());
    t.encoding = encoding;
    return t;
  }

  public TensorInfo name(String v) {
    name = v;
    return this;
  }

  public TensorInfo opType(String v) {
    opType = v;
    return this;
  }

  public TensorInfo role(Role v) {
    role = v;
    return this;
  }

  /** Which output / input / parameter of the module, 0 … 65535. */
  public TensorInfo roleIndex(int v) {
    roleIndex = v;
    return this;
  }

  /** An explicit execution index (u64), or {@link #AUTO_INDEX}. */
  public TensorInfo execIndex(long v) {
    execIndex = v;
    return this;
  }

  /** An explicit occurrence (u32, 0 … 2^32 − 2), or {@link #AUTO_OCCURRENCE}. */
  public TensorInfo occurrence(long v) {
    occurrence = v;
    return this;
  }

  public TensorInfo dtype(DType v) {
    dtype = v;
    return this;
  }

  /** Dims as u64 each (a negative long is a dim ≥ 2^63, which the shape rule refuses). */
  public TensorInfo shape(long... dims) {
    shape = dims.clone();
    return this;
  }

  /** One name per dim, or none. */
  public TensorInfo axes(String... names) {
    axes = new ArrayList<>(Arrays.asList(names));
    return this;
  }

  public TensorInfo axes(List<String> names) {
    axes = new ArrayList<>(names);
    return this;
  }

  /** Appends an attribute (order is kept; keys must be unique). */
  public TensorInfo attr(String key, String value) {
    attrs.add(new String[] {key, value});
    return this;
  }

  /** Appends attributes in the map's iteration order. */
  public TensorInfo attrs(Map<String, String> kv) {
    for (Map.Entry<String, String> e : kv.entrySet()) attr(e.getKey(), e.getValue());
    return this;
  }

  public TensorInfo encoding(Encoding v) {
    encoding = v;
    return this;
  }

  public String name() {
    return name;
  }

  public String opType() {
    return opType;
  }

  public Role role() {
    return role;
  }

  public int roleIndex() {
    return roleIndex;
  }

  public long execIndex() {
    return execIndex;
  }

  public long occurrence() {
    return occurrence;
  }

  public DType dtype() {
    return dtype;
  }

  public long[] shape() {
    return shape.clone();
  }

  public int rank() {
    return shape.length;
  }

  long dim(int i) {
    return shape[i];
  }

  public List<String> axes() {
    return Collections.unmodifiableList(axes);
  }

  /** Attributes as {key, value} pairs in file order. */
  public List<String[]> attrs() {
    List<String[]> out = new ArrayList<>();
    for (String[] kv : attrs) out.add(kv.clone());
    return out;
  }

  List<String[]> attrsView() {
    return attrs;
  }

  public Encoding encoding() {
    return encoding;
  }

  /**
   * The element count: the product of the dims, 1 for rank 0, 0 when a dim is 0; -1 (u64 ~0)
   * when it overflows 64 bits (such a shape is refused anyway).
   */
  public long numel() {
    long n = 1;
    for (long d : shape) {
      if (Unsigned.mulOverflows(n, d)) return -1L;
      n *= d;
    }
    return n;
  }

  @Override
  public String toString() {
    return name + " " + dtype + Arrays.toString(shape);
  }
}

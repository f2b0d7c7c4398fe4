// A tiny transformer encoder run the way a C++ inference engine records itself with driftscope:
// every module's output goes through the public Writer API as the module finishes.
//
// The model (pre-norm, 4 blocks, hidden 64, 4 heads, MLP 256, seq 16) has deterministic weights
// from a fixed-seed SplitMix64, and one feature real transformers have: block 1's MLP writes
// "massive activations" (Sun et al., 2024: a few hidden channels with values in the thousands,
// nearly constant across tokens, acting like a bias) into the residual stream. float32 carries
// them without trouble. In the float16 run every op's result is rounded to binary16 and the
// LayerNorm kernel keeps its statistics in half precision, computing the variance in one pass as
// E[x^2] - E[x]^2 (what a fused fp16 kernel does). The first LayerNorm that sees the massive
// channels, encoder.layers.2.norm1, squares ~6000 (x^2 = 3.6e7 > 65504, the largest binary16) and
// its mean (~375, mean^2 = 1.4e5 > 65504): both overflow to +Inf, Inf - Inf is NaN, and the NaN
// flows into everything after it. Nothing before that LayerNorm overflows.
//
//   tiny_encoder OUT_DIR                 writes OUT_DIR/fp32.tdump and OUT_DIR/fp16.tdump
//   tiny_encoder --precision fp16 FILE   writes one run (fp32, fp16, or fp16-safe: LayerNorm
//                                        statistics in float32, the usual fix)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "driftscope/decode.hpp"
#include "driftscope/writer.hpp"

namespace {

namespace ds = driftscope;

constexpr size_t kVocab = 96;
constexpr size_t kSeq = 16;
constexpr size_t kHidden = 64;
constexpr size_t kHeads = 4;
constexpr size_t kHeadDim = kHidden / kHeads;
constexpr size_t kFfn = 256;
constexpr size_t kLayers = 4;
constexpr size_t kMassiveLayer = 1;     // whose MLP writes the massive activations
constexpr size_t kMassiveChannels = 4;  // how many hidden channels carry them
constexpr float kMassiveValue = 6000.f; // finite in binary16 (max 65504), its square is not
constexpr float kLayerNormEps = 1e-5f;
constexpr uint64_t kSeed = 20261129;

enum class Precision { fp32, fp16, fp16_safe };

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::fp32: return "float32";
    case Precision::fp16: return "float16";
    case Precision::fp16_safe: return "float16 (LayerNorm statistics in float32)";
  }
  return "?";
}

// SplitMix64 (Steele, Lea, Flood 2014): a fixed seed gives the same weights on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1): the top 24 bits make an exact float.
  float uniform() { return static_cast<float>(next() >> 40) / 8388608.f - 1.f; }

 private:
  uint64_t s_;
};

// A row-major activation with its axis names, as the engine would hold it.
struct Tensor {
  std::vector<uint64_t> shape;
  std::vector<std::string> axes;
  std::vector<float> v;
  Tensor(std::vector<uint64_t> s, std::vector<std::string> a)
      : shape(std::move(s)), axes(std::move(a)) {
    size_t n = 1;
    for (uint64_t d : shape) n *= static_cast<size_t>(d);
    v.assign(n, 0.f);
  }
};

Tensor activation(size_t width, const char* last_axis) {
  return Tensor({1, kSeq, width}, {"batch", "seq", last_axis});
}

struct Linear {
  size_t in = 0, out = 0;
  std::vector<float> w;  // [in][out]
  std::vector<float> b;  // [out]
};

struct Norm {
  std::vector<float> gamma, beta;
};

struct Block {
  Norm norm1, norm2;
  Linear q, k, v, o, fc1, fc2;
};

struct Weights {
  std::vector<float> tok_emb;  // [vocab][hidden]
  std::vector<float> pos_emb;  // [seq][hidden]
  Block blocks[kLayers];
  Norm norm_f;
  Linear head;
};

Linear make_linear(Rng& rng, size_t in, size_t out) {
  // U(-a, a) with a = sqrt(3 / fan_in) has variance 1 / fan_in: activations keep their scale.
  Linear l{in, out, std::vector<float>(in * out), std::vector<float>(out)};
  float a = std::sqrt(3.f / static_cast<float>(in));
  for (float& x : l.w) x = a * rng.uniform();
  for (float& x : l.b) x = 0.02f * rng.uniform();
  return l;
}

Norm make_norm(Rng& rng) {
  Norm n{std::vector<float>(kHidden), std::vector<float>(kHidden)};
  for (float& g : n.gamma) g = 1.f + 0.1f * rng.uniform();
  for (float& b : n.beta) b = 0.05f * rng.uniform();
  return n;
}

Weights make_weights() {
  Rng rng(kSeed);
  Weights w;
  w.tok_emb.resize(kVocab * kHidden);
  w.pos_emb.resize(kSeq * kHidden);
  for (float& x : w.tok_emb) x = rng.uniform();
  for (float& x : w.pos_emb) x = 0.1f * rng.uniform();
  for (size_t l = 0; l < kLayers; ++l) {
    Block& b = w.blocks[l];
    b.norm1 = make_norm(rng);
    b.q = make_linear(rng, kHidden, kHidden);
    b.k = make_linear(rng, kHidden, kHidden);
    b.v = make_linear(rng, kHidden, kHidden);
    b.o = make_linear(rng, kHidden, kHidden);
    b.norm2 = make_norm(rng);
    b.fc1 = make_linear(rng, kHidden, kFfn);
    b.fc2 = make_linear(rng, kFfn, kHidden);
  }
  // The massive activations: a few fc2 output channels with a bias in the thousands, the
  // bias-like shape Sun et al. observe in trained LLMs.
  for (size_t c = 0; c < kMassiveChannels; ++c)
    w.blocks[kMassiveLayer].fc2.b[7 + 13 * c] = kMassiveValue * (1.f + 0.01f * static_cast<float>(c));
  w.norm_f = make_norm(rng);
  w.head = make_linear(rng, kHidden, kVocab);
  return w;
}

// The numeric behaviour of one run: `r` rounds a result to the run's storage precision.
class Engine {
 public:
  Engine(Precision p, ds::Writer& writer) : p_(p), writer_(writer) {}

  float r(float x) const {
    if (p_ == Precision::fp32) return x;
    return static_cast<float>(ds::f16_to_double(ds::double_to_f16(x)));
  }
  // LayerNorm internals: half precision in the plain fp16 run, float32 in the fixed one (whose
  // LayerNorm only rounds its output, as fp16 engines do when they keep norms in float32).
  float rs(float x) const { return p_ == Precision::fp16_safe ? x : r(x); }

  void round_weights(Weights& w) const {
    auto rr = [&](std::vector<float>& v) {
      for (float& x : v) x = r(x);
    };
    rr(w.tok_emb);
    rr(w.pos_emb);
    auto rl = [&](Linear& l) {
      rr(l.w);
      rr(l.b);
    };
    auto rn = [&](Norm& n) {
      rr(n.gamma);
      rr(n.beta);
    };
    for (Block& b : w.blocks) {
      for (Norm* n : {&b.norm1, &b.norm2}) rn(*n);
      for (Linear* l : {&b.q, &b.k, &b.v, &b.o, &b.fc1, &b.fc2}) rl(*l);
    }
    rn(w.norm_f);
    rl(w.head);
  }

  // Records a module's output the way an engine does: float32 bytes, or binary16 bytes in the
  // half-precision runs (the values are already binary16, so the conversion is exact).
  void record(const std::string& name, const char* op, const Tensor& t,
              ds::KeyValues attrs = {}) {
    if (!ok_) return;  // the first error stops recording; run() reports it
    ds::TensorInfo info;
    info.name = name;
    info.op_type = op;
    info.shape = t.shape;
    info.axes = t.axes;
    info.attrs = std::move(attrs);
    std::span<const std::byte> payload;
    if (p_ == Precision::fp32) {
      info.dtype = ds::DType::f32;
      payload = std::as_bytes(std::span<const float>(t.v));
    } else {
      info.dtype = ds::DType::f16;
      half_.resize(t.v.size());
      for (size_t i = 0; i < t.v.size(); ++i) half_[i] = ds::double_to_f16(t.v[i]);
      payload = std::as_bytes(std::span<const uint16_t>(half_));
    }
    auto res = writer_.write(info, payload);
    if (!res) {
      std::fprintf(stderr, "tiny_encoder: error: %s\n", res.error().to_string().c_str());
      ok_ = false;
    }
  }
  bool ok() const { return ok_; }

  Tensor linear(const Tensor& x, const Linear& l, const char* last_axis) const {
    Tensor y = activation(l.out, last_axis);
    for (size_t s = 0; s < kSeq; ++s)
      for (size_t o = 0; o < l.out; ++o) {
        // Accumulate in float32 and round once, like fp16 GEMMs with fp32 accumulators.
        float acc = l.b[o];
        for (size_t i = 0; i < l.in; ++i) acc += x.v[s * l.in + i] * l.w[i * l.out + o];
        y.v[s * l.out + o] = r(acc);
      }
    return y;
  }

  Tensor layer_norm(const Tensor& x, const Norm& n) const {
    Tensor y = activation(kHidden, "hidden");
    const float inv_n = 1.f / static_cast<float>(kHidden);
    for (size_t s = 0; s < kSeq; ++s) {
      const float* row = &x.v[s * kHidden];
      // One pass: var = E[x^2] - E[x]^2, each step rounded to the statistics precision.
      float sum = 0.f, sumsq = 0.f;
      for (size_t i = 0; i < kHidden; ++i) {
        sum = rs(sum + row[i]);
        sumsq = rs(sumsq + rs(row[i] * row[i]));
      }
      float mean = rs(sum * inv_n);
      float var = rs(rs(sumsq * inv_n) - rs(mean * mean));
      float rstd = rs(1.f / std::sqrt(rs(var + kLayerNormEps)));
      for (size_t i = 0; i < kHidden; ++i)
        y.v[s * kHidden + i] = r(rs(rs(row[i] - mean) * rstd) * n.gamma[i] + n.beta[i]);
    }
    return y;
  }

  Tensor add(const Tensor& a, const Tensor& b) const {
    Tensor y = a;
    for (size_t i = 0; i < y.v.size(); ++i) y.v[i] = r(a.v[i] + b.v[i]);
    return y;
  }

  Tensor gelu(const Tensor& x) const {
    Tensor y = x;
    for (float& v : y.v) v = r(0.5f * v * (1.f + std::erf(v * 0.70710678f)));
    return y;
  }

  // Scaled dot-product attention; returns the context and records the probabilities.
  Tensor attention(const std::string& prefix, const Tensor& q, const Tensor& k, const Tensor& v) {
    Tensor probs({1, kHeads, kSeq, kSeq}, {"batch", "heads", "query", "key"});
    Tensor ctx = activation(kHidden, "hidden");
    const float scale = 1.f / std::sqrt(static_cast<float>(kHeadDim));
    for (size_t h = 0; h < kHeads; ++h)
      for (size_t i = 0; i < kSeq; ++i) {
        float* p = &probs.v[(h * kSeq + i) * kSeq];
        float mx = -INFINITY;
        for (size_t j = 0; j < kSeq; ++j) {
          float dot = 0.f;
          for (size_t d = 0; d < kHeadDim; ++d)
            dot += q.v[i * kHidden + h * kHeadDim + d] * k.v[j * kHidden + h * kHeadDim + d];
          p[j] = r(dot * scale);
          mx = std::max(mx, p[j]);
        }
        float sum = 0.f;
        for (size_t j = 0; j < kSeq; ++j) sum += (p[j] = r(std::exp(r(p[j] - mx))));
        sum = r(sum);
        for (size_t j = 0; j < kSeq; ++j) p[j] = r(p[j] / sum);
        for (size_t d = 0; d < kHeadDim; ++d) {
          float acc = 0.f;
          for (size_t j = 0; j < kSeq; ++j) acc += p[j] * v.v[j * kHidden + h * kHeadDim + d];
          ctx.v[i * kHidden + h * kHeadDim + d] = r(acc);
        }
      }
    record(prefix + ".softmax", "Softmax", probs);
    return ctx;
  }

  // The forward pass; every module output is recorded in execution order.
  Tensor forward(const Weights& w, const std::vector<uint32_t>& tokens) {
    Tensor x = activation(kHidden, "hidden");
    for (size_t s = 0; s < kSeq; ++s)
      for (size_t i = 0; i < kHidden; ++i)
        x.v[s * kHidden + i] = r(w.tok_emb[tokens[s] * kHidden + i] + w.pos_emb[s * kHidden + i]);
    record("embeddings", "Embedding", x);

    for (size_t l = 0; l < kLayers && ok_; ++l) {
      const Block& b = w.blocks[l];
      const std::string p = "encoder.layers." + std::to_string(l);
      const ds::KeyValues layer_attr{{"layer", std::to_string(l)}};

      Tensor h = layer_norm(x, b.norm1);
      record(p + ".norm1", "LayerNorm", h, {{"eps", "1e-05"}});
      Tensor q = linear(h, b.q, "hidden");
      record(p + ".attn.q_proj", "Linear", q);
      Tensor k = linear(h, b.k, "hidden");
      record(p + ".attn.k_proj", "Linear", k);
      Tensor v = linear(h, b.v, "hidden");
      record(p + ".attn.v_proj", "Linear", v);
      Tensor ctx = attention(p + ".attn", q, k, v);
      Tensor a = linear(ctx, b.o, "hidden");
      record(p + ".attn.out_proj", "Linear", a);
      x = add(x, a);
      record(p + ".residual1", "Add", x, layer_attr);

      h = layer_norm(x, b.norm2);
      record(p + ".norm2", "LayerNorm", h, {{"eps", "1e-05"}});
      Tensor f = linear(h, b.fc1, "ffn");
      record(p + ".mlp.fc1", "Linear", f);
      f = gelu(f);
      record(p + ".mlp.act", "GELU", f);
      Tensor m = linear(f, b.fc2, "hidden");
      record(p + ".mlp.fc2", "Linear", m);
      x = add(x, m);
      record(p + ".residual2", "Add", x, layer_attr);
    }
    Tensor h = layer_norm(x, w.norm_f);
    record("encoder.norm", "LayerNorm", h, {{"eps", "1e-05"}});
    Tensor logits = linear(h, w.head, "vocab");
    record("lm_head", "Linear", logits);
    return logits;
  }

 private:
  Precision p_;
  ds::Writer& writer_;
  std::vector<uint16_t> half_;
  bool ok_ = true;
};

int run(Precision p, const std::string& path) {
  ds::WriterOptions opts;
  opts.metadata = {
      {"framework", "driftscope tiny_encoder example (c++)"},
      {"backend", p == Precision::fp32 ? "cpu:reference" : "cpu:fp16-emulation"},
      {"device", "cpu"},
      {"precision", std::string(precision_name(p))},
      {"model", "tiny-encoder L4 H64 A4 F256 S16"},
      {"seed", std::to_string(kSeed)},
  };
  // A fixed salt per precision: the demo's files are byte-for-byte reproducible.
  opts.fixed_salt = true;
  opts.salt = kSeed * 4 + static_cast<uint64_t>(p);
  auto writer = ds::Writer::create(path, opts);
  if (!writer) {
    std::fprintf(stderr, "tiny_encoder: error: %s\n", writer.error().to_string().c_str());
    return 2;
  }
  Weights w = make_weights();
  Engine engine(p, **writer);
  engine.round_weights(w);
  std::vector<uint32_t> tokens(kSeq);
  Rng rng(kSeed ^ 0x70CE55ull);
  for (uint32_t& t : tokens) t = static_cast<uint32_t>(rng.next() % kVocab);
  engine.forward(w, tokens);
  auto closed = (*writer)->close();
  if (!closed) {
    std::fprintf(stderr, "tiny_encoder: error: %s\n", closed.error().to_string().c_str());
    return 2;
  }
  if (!engine.ok()) return 2;
  std::fprintf(stderr, "tiny_encoder: %s run: %llu tensors -> %s\n", precision_name(p).data(),
               static_cast<unsigned long long>((*writer)->records_written()), path.c_str());
  return 0;
}

int usage(FILE* to, int rc) {
  std::fprintf(to,
               "usage: tiny_encoder OUT_DIR                      (writes fp32.tdump, fp16.tdump)\n"
               "       tiny_encoder --precision fp32|fp16|fp16-safe FILE\n");
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) return usage(stdout, 0);
  if (args.size() == 1 && !args[0].starts_with("-")) {
    std::error_code ec;
    std::filesystem::create_directories(std::string(args[0]), ec);
    if (ec) {
      std::fprintf(stderr, "tiny_encoder: error: cannot create %s: %s\n", argv[1],
                   ec.message().c_str());
      return 2;
    }
    std::string dir(args[0]);
    int rc = run(Precision::fp32, dir + "/fp32.tdump");
    return rc ? rc : run(Precision::fp16, dir + "/fp16.tdump");
  }
  if (args.size() == 3 && args[0] == "--precision") {
    if (args[1] == "fp32") return run(Precision::fp32, std::string(args[2]));
    if (args[1] == "fp16") return run(Precision::fp16, std::string(args[2]));
    if (args[1] == "fp16-safe") return run(Precision::fp16_safe, std::string(args[2]));
  }
  return usage(stderr, 2);
}

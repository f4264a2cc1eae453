// The synthetic DiT-like pipeline (synth.hpp). Matrix products are hand-written loops rather
// than Eigen: Eigen's GEMM blocks the K dimension by the detected cache sizes, so its summation
// order (and the bits) could change from host to host.
#include "attest/e2e/synth.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "attest/core/philox.hpp"
#include "attest/core/status.hpp"
#include "attest/core/tensor.hpp"
#include "attest/datasets/exact_math.hpp"
#include "attest/datasets/sample.hpp"
#include "attest/kernels/kernel.hpp"

namespace attest::e2e {
namespace {

using Vec = std::vector<float>;
constexpr int C = SynthArch::kChannels;

// bf16 round to nearest even, NaN kept quiet. Exact bit manipulation, no libm.
float bf16(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return std::bit_cast<float>(u | 0x00400000u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return std::bit_cast<float>(u & 0xffff0000u);
}

void round_bf16(Vec& v) {
  for (auto& x : v) x = bf16(x);
}

// Tensor ids of the weights: one Philox stream per weight tensor.
enum WeightId : std::uint32_t {
  w_in_video = 1, w_in_audio, pos_video, pos_audio, w_t1, w_t2, w_final_mod, w_out, dec_video, dec_audio,
  block_base = 0x100,  // + 0x10 * block + role
};
enum BlockRole : std::uint32_t { r_mod = 0, r_qkv, r_qnorm, r_knorm, r_o, r_mlp1, r_mlp2 };

double normal(std::uint64_t seed, std::uint32_t id, std::uint64_t i) {
  const auto w = philox_words(seed, id, i);
  return datasets::element::box_muller(w[0], w[1], w[2]);
}

// rows x cols matrix of N(0, gain^2 / fan_in) values rounded to bf16 (the stored weights).
Vec weight(std::uint64_t seed, std::uint32_t id, std::int64_t rows, std::int64_t cols, double gain) {
  Vec w(static_cast<std::size_t>(rows * cols));
  const double s = gain / std::sqrt(static_cast<double>(rows));
  for (std::int64_t i = 0; i < rows * cols; ++i)
    w[static_cast<std::size_t>(i)] = bf16(static_cast<float>(s * normal(seed, id, static_cast<std::uint64_t>(i))));
  return w;
}

struct Block {
  Vec mod;    // dim x 6*dim: shift1, scale1, gate1, shift2, scale2, gate2
  Vec qkv;    // dim x 3*dim
  Vec qnorm, knorm;  // head_dim gains
  Vec o;      // dim x dim
  Vec mlp1;   // dim x mlp
  Vec mlp2;   // mlp x dim
};

struct Weights {
  Vec in_video, in_audio;  // C x dim
  Vec pos_video, pos_audio;  // tokens x dim
  Vec t1, t2;              // dim x dim (time-embedding MLP)
  Vec final_mod;           // dim x 2*dim
  Vec out;                 // dim x C
  std::vector<Block> blocks;
  Vec dec_video;           // C x (patch^2 * 3)
  Vec dec_audio;           // C x 2*hop (windowed sinusoid bases)
};

// Work (multiply-adds) below which a loop runs on one thread: a parallel region costs more than
// it saves there, and far more on a loaded machine (a descheduled worker stalls the barrier).
constexpr std::int64_t kParallelWork = 1 << 22;

// out[n x m] = in[n x k] * w[k x m]: each output element sums k ascending in FP32 (no FMA:
// -ffp-contract=off), one row per OpenMP iteration, so the order never depends on threads.
Vec matmul(const Vec& in, std::int64_t n, std::int64_t k, const Vec& w, std::int64_t m) {
  Vec out(static_cast<std::size_t>(n * m), 0.0f);
#pragma omp parallel for schedule(static) if (n * k * m >= kParallelWork)
  for (std::int64_t i = 0; i < n; ++i) {
    float* o = out.data() + i * m;
    const float* a = in.data() + i * k;
    for (std::int64_t kk = 0; kk < k; ++kk) {
      const float ak = a[kk];
      const float* wr = w.data() + kk * m;
      for (std::int64_t j = 0; j < m; ++j) o[j] += ak * wr[j];
    }
  }
  return out;
}

// LayerNorm without affine, then AdaLN modulation x * (1 + scale) + shift, rounded to bf16.
Vec layer_norm_mod(const Vec& x, std::int64_t n, std::int64_t d, const float* shift, const float* scale) {
  Vec out(x.size());
#pragma omp parallel for schedule(static) if (n * d * 8 >= kParallelWork)
  for (std::int64_t i = 0; i < n; ++i) {
    const float* r = x.data() + i * d;
    float sum = 0;
    for (std::int64_t j = 0; j < d; ++j) sum += r[j];
    const float mean = sum / static_cast<float>(d);
    float var = 0;
    for (std::int64_t j = 0; j < d; ++j) var += (r[j] - mean) * (r[j] - mean);
    const float inv = 1.0f / std::sqrt(var / static_cast<float>(d) + 1e-6f);
    float* o = out.data() + i * d;
    for (std::int64_t j = 0; j < d; ++j) o[j] = bf16(bf16((r[j] - mean) * inv) * (1.0f + scale[j]) + shift[j]);
  }
  return out;
}

Weights make_weights(const SynthConfig& cfg) {
  const std::uint64_t s = cfg.weights_seed;
  const std::int64_t d = cfg.dim, hd = cfg.dim / cfg.heads;
  Weights w;
  w.in_video = weight(s, w_in_video, C, d, 1.0);
  w.in_audio = weight(s, w_in_audio, C, d, 1.0);
  // Positional embeddings of unit rms ("learned", here random): tokens are distinguishable.
  w.pos_video = weight(s, pos_video, 1, cfg.video_tokens() * d, 0.5);
  w.pos_audio = weight(s, pos_audio, 1, cfg.audio_tokens() * d, 0.5);
  w.t1 = weight(s, w_t1, d, d, 1.0);
  w.t2 = weight(s, w_t2, d, d, 1.0);
  w.final_mod = weight(s, w_final_mod, d, 2 * d, 0.2);
  w.out = weight(s, w_out, d, C, 1.0);
  for (int b = 0; b < cfg.blocks; ++b) {
    const std::uint32_t base = block_base + 0x10u * static_cast<std::uint32_t>(b);
    Block bl;
    bl.mod = weight(s, base + r_mod, d, 6 * d, 0.2);
    bl.qkv = weight(s, base + r_qkv, d, 3 * d, 1.0);
    // QK-norm gains around 2: logits of a few units, attention neither uniform nor one-hot.
    bl.qnorm = weight(s, base + r_qnorm, 1, hd, 0.25);
    bl.knorm = weight(s, base + r_knorm, 1, hd, 0.25);
    for (auto& g : bl.qnorm) g = bf16(2.0f + g);
    for (auto& g : bl.knorm) g = bf16(2.0f + g);
    bl.o = weight(s, base + r_o, d, d, 1.0);
    bl.mlp1 = weight(s, base + r_mlp1, d, cfg.mlp, 1.4142135623730951);  // ReLU keeps half the variance
    bl.mlp2 = weight(s, base + r_mlp2, cfg.mlp, d, 1.0);
    w.blocks.push_back(std::move(bl));
  }
  w.dec_video = weight(s, dec_video, C, SynthArch::kPatch * SynthArch::kPatch * 3, 1.0);
  // Audio basis c: a Hann-windowed sinusoid of frequency 110 (c + 1) Hz (harmonics of A2) over
  // two hops (50% overlap-add gives a smooth waveform). In-house sin/cos: same bits on every host.
  constexpr int win = 2 * SynthArch::kAudioHop;
  w.dec_audio.resize(static_cast<std::size_t>(C * win));
  for (int c = 0; c < C; ++c) {
    const double f = 110.0 * (c + 1);
    for (int n = 0; n < win; ++n) {
      const double hann = 0.5 - 0.5 * datasets::poly_sincos_2pi(static_cast<double>(n) / win).cos;
      const double ph = f * n / SynthArch::kSampleRate;
      w.dec_audio[static_cast<std::size_t>(c * win + n)] = static_cast<float>(hann * datasets::poly_sincos_2pi(ph).sin);
    }
  }
  return w;
}

// Sinusoidal embedding of t: cos then sin of 2 pi t f_k with f_k = (k + 1)^2 / 4 (exact in double;
// spans 0.25 to ~1000 like the usual geometric table, without libm's pow).
Vec time_embedding(double t, int dim) {
  Vec e(static_cast<std::size_t>(dim));
  const int half = dim / 2;
  for (int k = 0; k < half; ++k) {
    const double f = 0.25 * (k + 1) * (k + 1);
    const auto sc = datasets::poly_sincos_2pi(t * f);
    e[static_cast<std::size_t>(k)] = bf16(static_cast<float>(sc.cos));
    e[static_cast<std::size_t>(half + k)] = bf16(static_cast<float>(sc.sin));
  }
  return e;
}

void relu_bf16(Vec& v) {
  for (auto& x : v) x = bf16(std::max(x, 0.0f));
}

class Attention {
 public:
  Attention(const SynthConfig& cfg, kernels::Kernel& k, const Recipe& r)
      : cfg_(cfg), kernel_(k), recipe_(r), problem_(cfg.attention_problem()) {
    const std::int64_t n = cfg.tokens(), h = cfg.heads, hd = cfg.dim / cfg.heads;
    q_ = Tensor(DType::f32, {1, n, h, hd});
    k_ = Tensor(DType::f32, {1, n, h, hd});
    v_ = Tensor(DType::f32, {1, n, h, hd});
    o_ = Tensor(DType::f32, {1, n, h, hd});
  }
  // qkv: n x 3*dim rows (q | k | v, each heads x head_dim); returns n x dim, bf16.
  Vec run(const Vec& qkv, const Vec& qnorm, const Vec& knorm, SynthResult& res) {
    const std::int64_t n = cfg_.tokens(), h = cfg_.heads, hd = cfg_.dim / cfg_.heads, d = cfg_.dim;
    float* q = q_.data<float>();
    float* k = k_.data<float>();
    float* v = v_.data<float>();
    for (std::int64_t i = 0; i < n; ++i) {
      // K/V reversed: token i goes to slot n-1-i. With no mask attention is invariant under a
      // permutation of the keys (with the values), so only the kernel's summation order changes.
      const std::int64_t kv = cfg_.reverse_kv ? n - 1 - i : i;
      for (std::int64_t hh = 0; hh < h; ++hh) {
        const float* src = qkv.data() + i * 3 * d + hh * hd;
        rms_norm(src, qnorm, q + (i * h + hh) * hd, hd);
        rms_norm(src + d, knorm, k + (kv * h + hh) * hd, hd);
        for (std::int64_t j = 0; j < hd; ++j) v[(kv * h + hh) * hd + j] = src[2 * d + j];
      }
    }
    const kernels::Args args{problem_, recipe_, q_, k_, v_, o_, nullptr, ""};
    const auto t0 = std::chrono::steady_clock::now();
    kernel_.run(args);
    res.attention_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++res.attention_calls;
    const float* o = o_.data<float>();
    Vec out(static_cast<std::size_t>(n * d));
    for (std::int64_t i = 0; i < n * d; ++i) out[static_cast<std::size_t>(i)] = bf16(o[i]);
    return out;
  }

 private:
  static void rms_norm(const float* x, const Vec& g, float* out, std::int64_t hd) {
    float ss = 0;
    for (std::int64_t j = 0; j < hd; ++j) ss += x[j] * x[j];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(hd) + 1e-6f);
    for (std::int64_t j = 0; j < hd; ++j) out[j] = bf16(bf16(x[j] * inv) * g[static_cast<std::size_t>(j)]);
  }
  const SynthConfig& cfg_;
  kernels::Kernel& kernel_;
  const Recipe& recipe_;
  Problem problem_;
  Tensor q_, k_, v_, o_;
};

// One velocity evaluation v(x, t); x: tokens x C (FP32 latent).
Vec velocity(const SynthConfig& cfg, const Weights& w, Attention& attn, const Vec& x, double t, SynthResult& res) {
  const std::int64_t nv = cfg.video_tokens(), na = cfg.audio_tokens(), n = nv + na, d = cfg.dim;
  // Embedding: the latent is cast to bf16 (the model's input dtype), projected, plus position.
  Vec xin(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) xin[i] = bf16(x[i]);
  Vec hv = matmul(Vec(xin.begin(), xin.begin() + nv * C), nv, C, w.in_video, d);
  Vec ha = matmul(Vec(xin.begin() + nv * C, xin.end()), na, C, w.in_audio, d);
  Vec h(static_cast<std::size_t>(n * d));
  for (std::int64_t i = 0; i < nv * d; ++i)
    h[static_cast<std::size_t>(i)] = bf16(bf16(hv[static_cast<std::size_t>(i)]) + w.pos_video[static_cast<std::size_t>(i)]);
  for (std::int64_t i = 0; i < na * d; ++i)
    h[static_cast<std::size_t>(nv * d + i)] = bf16(bf16(ha[static_cast<std::size_t>(i)]) + w.pos_audio[static_cast<std::size_t>(i)]);

  // Step conditioning c = relu(W2 relu(W1 temb(t))), shared by every block (AdaLN-Zero style).
  Vec c = matmul(time_embedding(t, cfg.dim), 1, d, w.t1, d);
  relu_bf16(c);
  c = matmul(c, 1, d, w.t2, d);
  relu_bf16(c);

  for (const Block& b : w.blocks) {
    Vec mod = matmul(c, 1, d, b.mod, 6 * d);
    round_bf16(mod);
    const float* shift1 = mod.data();
    const float* scale1 = shift1 + d;
    const float* gate1 = scale1 + d;
    const float* shift2 = gate1 + d;
    const float* scale2 = shift2 + d;
    const float* gate2 = scale2 + d;
    // Attention branch.
    Vec a = layer_norm_mod(h, n, d, shift1, scale1);
    Vec qkv = matmul(a, n, d, b.qkv, 3 * d);
    round_bf16(qkv);
    Vec att = attn.run(qkv, b.qnorm, b.knorm, res);
    Vec o = matmul(att, n, d, b.o, d);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < d; ++j) {
        const auto ix = static_cast<std::size_t>(i * d + j);
        // Gate offset 1: every block contributes from the first step (random weights have no
        // trained zero-initialised gates).
        h[ix] = bf16(h[ix] + bf16(bf16(o[ix]) * (1.0f + gate1[j])));
      }
    // MLP branch.
    Vec m = layer_norm_mod(h, n, d, shift2, scale2);
    Vec u = matmul(m, n, d, b.mlp1, cfg.mlp);
    relu_bf16(u);
    Vec y = matmul(u, n, cfg.mlp, b.mlp2, d);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < d; ++j) {
        const auto ix = static_cast<std::size_t>(i * d + j);
        h[ix] = bf16(h[ix] + bf16(bf16(y[ix]) * (1.0f + gate2[j])));
      }
  }
  Vec fm = matmul(c, 1, d, w.final_mod, 2 * d);
  round_bf16(fm);
  Vec f = layer_norm_mod(h, n, d, fm.data(), fm.data() + d);
  Vec vel = matmul(f, n, d, w.out, C);
  round_bf16(vel);  // the model's output dtype; the sampler then works in FP32
  return vel;
}

void decode(const SynthConfig& cfg, const Weights& w, const Vec& x, SynthResult& res) {
  constexpr int P = SynthArch::kPatch;
  const int pw = cfg.patches_w(), ph = cfg.patches_h();
  res.frames.assign(static_cast<std::size_t>(cfg.frames) * cfg.height * cfg.width * 3, 0);
  // Video: each patch's latent through a fixed linear map to 8 x 8 x 3 values, then
  // 128 + 40 v rounded and clamped to [0, 255] (FP32, fixed order).
  for (int f = 0; f < cfg.frames; ++f)
    for (int py = 0; py < ph; ++py)
      for (int px = 0; px < pw; ++px) {
        const std::int64_t tok = (static_cast<std::int64_t>(f) * ph + py) * pw + px;
        const float* z = x.data() + tok * C;
        for (int e = 0; e < P * P * 3; ++e) {
          float acc = 0;
          for (int c = 0; c < C; ++c) acc += z[c] * w.dec_video[static_cast<std::size_t>(c * P * P * 3 + e)];
          const float val = std::clamp(std::nearbyint(128.0f + 40.0f * acc), 0.0f, 255.0f);
          const int dy = e / (P * 3), dx = (e / 3) % P, ch = e % 3;
          const std::size_t pix = ((static_cast<std::size_t>(f) * cfg.height + py * P + dy) * cfg.width + px * P + dx) * 3 + ch;
          res.frames[pix] = static_cast<std::uint8_t>(val);
        }
      }
  // Audio: overlap-add of each audio token's windowed sinusoids (hop kAudioHop, window 2 hops),
  // scaled by 0.125 / sqrt(C) and clipped to [-1, 1].
  constexpr int hop = SynthArch::kAudioHop, win = 2 * hop;
  const std::int64_t na = cfg.audio_tokens(), nv = cfg.video_tokens();
  res.audio.assign(static_cast<std::size_t>(cfg.audio_samples()), 0.0f);
  for (std::int64_t a = 0; a < na; ++a) {
    const float* z = x.data() + (nv + a) * C;
    for (int n = 0; n < win; ++n) {
      const std::int64_t s = a * hop + n - hop / 2;
      if (s < 0 || s >= cfg.audio_samples()) continue;
      float acc = 0;
      for (int c = 0; c < C; ++c) acc += z[c] * w.dec_audio[static_cast<std::size_t>(c * win + n)];
      res.audio[static_cast<std::size_t>(s)] += acc * 0.03125f;  // 0.125 / sqrt(16): rms ~0.1, rarely clipped
    }
  }
  for (auto& s : res.audio) s = std::clamp(s, -1.0f, 1.0f);
}

}  // namespace

Status SynthConfig::validate() const {
  const auto bad = [](const std::string& s) { return Status::unsupported(s); };
  if (frames < 1 || frames > 4096) return bad("--frames " + std::to_string(frames) + ": must be in [1, 4096]");
  if (width < SynthArch::kPatch || width % SynthArch::kPatch != 0 || width > 8192)
    return bad("--size: width " + std::to_string(width) + " is not a positive multiple of 8 (at most 8192)");
  if (height < SynthArch::kPatch || height % SynthArch::kPatch != 0 || height > 8192)
    return bad("--size: height " + std::to_string(height) + " is not a positive multiple of 8 (at most 8192)");
  if (steps < 1 || steps > 1000) return bad("--steps " + std::to_string(steps) + ": must be in [1, 1000]");
  if (heads < 1 || dim % heads != 0 || dim / heads % 8 != 0 || dim < 8)
    return bad("model width " + std::to_string(dim) + " / heads " + std::to_string(heads) + ": head dim must be a multiple of 8");
  if (blocks < 1 || mlp < 1) return bad("model: blocks and mlp width must be positive");
  if (tokens() > (1 << 20)) return bad("--frames/--size: " + std::to_string(tokens()) + " tokens (more than 2^20)");
  return Status::ok();
}

Problem SynthConfig::attention_problem() const {
  Problem p;
  p.batch = 1;
  p.heads_q = p.heads_kv = heads;
  p.seqlen_q = p.seqlen_kv = tokens();
  p.head_dim = p.head_dim_v = dim / heads;
  p.dtype = DType::bf16;  // q, k, v hold bf16 values (the model's activations)
  return p;
}

KernelChoice choose_kernel(const std::string& name, const std::string& recipe) {
  auto& reg = kernels::Registry::instance();
  KernelChoice kc;
  kc.kernel = reg.find(name);
  if (kc.kernel == nullptr) {
    std::string names;
    for (const auto& k : reg.all()) names += (names.empty() ? "" : ", ") + k->name();
    throw Error("kernel '" + name + "' is not registered (registered: " + names + ")");
  }
  const std::string r = recipe.empty() ? kc.kernel->recipes().at(0) : recipe;
  kc.recipe = parse_recipe(r);
  kc.recipe_label = recipe_label(kc.recipe);
  return kc;
}

SynthResult run_synth(const SynthConfig& cfg, kernels::Kernel& kernel, const Recipe& recipe,
                      const std::function<void(int)>& progress) {
  if (auto st = cfg.validate(); !st) throw Error(st.reason());
  const Problem p = cfg.attention_problem();
  if (auto st = kernel.supports(p, recipe); !st)
    throw Error("kernel " + kernel.name() + " refuses recipe " + recipe_label(recipe) + " on " + to_string(p) + ": " + st.reason());
  const auto t0 = std::chrono::steady_clock::now();
  const Weights w = make_weights(cfg);
  Attention attn(cfg, kernel, recipe);
  SynthResult res;
  const std::int64_t n = cfg.tokens();
  const std::size_t per = static_cast<std::size_t>(n * C);
  res.latents.resize(per * static_cast<std::size_t>(cfg.steps + 1));
  // Initial noise: N(0, 1) from Philox keyed by the noise seed (tensor id 1), element = index.
  Vec x(per);
  for (std::size_t i = 0; i < per; ++i) x[i] = static_cast<float>(normal(cfg.seed, 1, i));
  std::copy(x.begin(), x.end(), res.latents.begin());
  // Flow matching, t from 1 (noise) to 0 (data), x_t = t noise + (1 - t) data, v = dx/dt;
  // Euler: x <- x + (t_next - t) v, t_k = 1 - k / steps.
  res.step_t.push_back(1.0);
  for (int s = 0; s < cfg.steps; ++s) {
    const double t = 1.0 - static_cast<double>(s) / cfg.steps, tn = 1.0 - static_cast<double>(s + 1) / cfg.steps;
    const Vec v = velocity(cfg, w, attn, x, t, res);
    const auto dt = static_cast<float>(tn - t);
    for (std::size_t i = 0; i < per; ++i) x[i] += dt * v[i];
    std::copy(x.begin(), x.end(), res.latents.begin() + static_cast<std::ptrdiff_t>(per * static_cast<std::size_t>(s + 1)));
    res.step_t.push_back(tn);
    if (progress) progress(s + 1);
  }
  decode(cfg, w, x, res);
  res.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

std::vector<StepDivergence> latent_divergence(const SynthConfig& cfg, const std::vector<float>& run,
                                              const std::vector<float>& ref, const std::vector<double>& step_t) {
  if (run.size() != ref.size())
    throw Error("latent divergence: run has " + std::to_string(run.size()) + " latent values, reference " + std::to_string(ref.size()) +
                " (different --steps, --frames or --size?)");
  const std::size_t per = static_cast<std::size_t>(cfg.tokens() * C), nvv = static_cast<std::size_t>(cfg.video_tokens() * C);
  if (per == 0 || run.size() % per != 0) throw Error("latent divergence: latent size does not match the configuration");
  std::vector<StepDivergence> out;
  for (std::size_t s = 0; s < run.size() / per; ++s) {
    StepDivergence d;
    d.step = static_cast<int>(s);
    d.t = s < step_t.size() ? step_t[s] : 0.0;
    double num = 0, den = 0, vn = 0, vd = 0;
    for (std::size_t i = 0; i < per; ++i) {
      const float a = run[s * per + i], b = ref[s * per + i];
      const double e = static_cast<double>(a) - b;
      num += e * e;
      den += static_cast<double>(b) * b;
      if (i < nvv) {
        vn += e * e;
        vd += static_cast<double>(b) * b;
      }
      d.max_abs = std::max(d.max_abs, std::abs(e));
      d.mismatches += std::bit_cast<std::uint32_t>(a) != std::bit_cast<std::uint32_t>(b);
    }
    d.rel_l2 = den > 0 ? std::sqrt(num / den) : 0.0;
    d.video_rel_l2 = vd > 0 ? std::sqrt(vn / vd) : 0.0;
    d.audio_rel_l2 = den - vd > 0 ? std::sqrt((num - vn) / (den - vd)) : 0.0;
    out.push_back(d);
  }
  return out;
}

}  // namespace attest::e2e

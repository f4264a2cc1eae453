// gpu.ref64 against an independent long-double oracle: every Problem feature (GQA/MQA, cross,
// causal_tl/br, ragged, head_dim_v != head_dim, bhsd/strided/packed layouts, fully masked rows),
// both device paths, special values, determinism. Tolerance: normwise relative 1e-13 on out
// (max |gpu - oracle| / max |oracle|) and 1e-13 * max(1, |lse|) on the LSE; the FP64 rounding
// of either path is about 1e-15 on these inputs (normal data, <= 150 keys, D <= 128).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attest/core/recipe.hpp"
#include "attest/datasets/distributions.hpp"
#include "attest/kernels/gpu/attn_fwd_ref64.hpp"
#include "attest/kernels/kernel.hpp"
#include "gpu_test_util.hpp"
#include "kernel_test_util.hpp"

namespace attest::gpu {
namespace {

constexpr double kTol = 1e-13;
const double kNan = std::numeric_limits<double>::quiet_NaN();

struct Out {
  std::vector<double> out, lse;  // contiguous [B|1,tokens,H,Dv] and [B|1,H,tokens]
};

// Compares with the oracle: NaN where the oracle is NaN, -inf where it is -inf, else normwise.
void expect_close(const Out& got, const test::Oracle& want, const std::string& what) {
  ASSERT_EQ(got.out.size(), want.out.size());
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < want.out.size(); ++i) {
    const double w = static_cast<double>(want.out[i]), g = got.out[i];
    if (std::isnan(w)) {
      ASSERT_TRUE(std::isnan(g)) << what << ": out[" << i << "] = " << g << ", oracle NaN";
      continue;
    }
    ASSERT_TRUE(std::isfinite(g)) << what << ": out[" << i << "] = " << g << ", oracle " << w;
    err = std::max(err, std::abs(g - w));
    norm = std::max(norm, std::abs(w));
  }
  EXPECT_LE(err, kTol * norm) << what << ": max abs error " << err << " vs max |out| " << norm;
  for (std::size_t i = 0; i < want.lse.size(); ++i) {
    const double w = static_cast<double>(want.lse[i]), g = got.lse[i];
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << what << ": lse[" << i << "]";
    } else if (std::isinf(w)) {
      EXPECT_EQ(g, w) << what << ": lse[" << i << "]";
    } else {
      EXPECT_LE(std::abs(g - w), kTol * std::max(1.0, std::abs(w))) << what << ": lse[" << i << "] " << g << " vs " << w;
    }
  }
}

// Through the registry (host Tensors in the problem's layout, f64 outputs poisoned with NaN).
Out run_registry(const Problem& p, const datasets::Qkv& in) {
  kernels::Kernel* k = kernels::Registry::instance().find("gpu.ref64");
  if (k == nullptr) throw Error("gpu.ref64 is not registered");
  const Recipe r = parse_recipe("q=f32;k=f32;v=f32;p=f32;out=f32");
  if (auto st = k->supports(p, r); !st) throw Error("gpu.ref64 refused " + to_string(p) + ": " + st.reason());
  const float nan = std::numeric_limits<float>::quiet_NaN();  // in the unused (pad) elements
  const auto laid_out = [&](const Tensor& x) { return kernels::test::relayout(x, p.layout, p.pad, nan); };
  const Tensor q = laid_out(in.q), kk = laid_out(in.k), v = laid_out(in.v);
  Shape osh = in.q.shape();
  osh[3] = p.head_dim_v;
  Tensor out(DType::f64, osh), lse(DType::f64, {osh[0], p.heads_q, osh[1]});
  std::fill(out.data<double>(), out.data<double>() + out.numel(), kNan);
  std::fill(lse.data<double>(), lse.data<double>() + lse.numel(), kNan);
  k->run(kernels::Args{p, r, q, kk, v, out, &lse, ""});
  return {std::vector<double>(out.data<double>(), out.data<double>() + out.numel()),
          std::vector<double>(lse.data<double>(), lse.data<double>() + lse.numel())};
}

TensorRef contiguous_arg(const DeviceBuffer& buf, const Shape& shape, DType t) {
  TensorRef d;
  d.data = buf.data();
  d.dtype = t;
  d.device = true;
  const Shape st = contiguous_strides(shape);
  for (std::size_t i = 0; i < st.size(); ++i) d.shape[i] = shape[i], d.stride[i] = st[i];
  return d;
}

// Through the device-pointer entry point with an explicit path (contiguous bshd tensors); inputs
// handed over as f32 (the generated tensors) or widened exactly to f64.
Out run_device(const Problem& p, const datasets::Qkv& in, Ref64Path path, DType it = DType::f32) {
  const auto upload = [&](const Tensor& x) {
    const float* f = x.data<float>();
    if (it == DType::f32) {
      DeviceBuffer d(static_cast<std::size_t>(x.numel()) * 4);
      d.upload(f, d.bytes());
      return d;
    }
    const std::vector<double> w(f, f + x.numel());
    DeviceBuffer d(w.size() * 8);
    d.upload(w.data(), d.bytes());
    return d;
  };
  DeviceBuffer q = upload(in.q), k = upload(in.k), v = upload(in.v);
  Shape osh = in.q.shape();
  osh[3] = p.head_dim_v;
  const Shape lsh{osh[0], p.heads_q, osh[1]};
  DeviceBuffer out(static_cast<std::size_t>(shape_numel(osh)) * 8), lse(static_cast<std::size_t>(shape_numel(lsh)) * 8);
  out.fill_bytes(0xFF);  // NaN pattern: an unwritten element fails the comparison
  lse.fill_bytes(0xFF);
  Ref64Args a = ref64_args(p);
  a.q = contiguous_arg(q, in.q.shape(), it);
  a.k = contiguous_arg(k, in.k.shape(), it);
  a.v = contiguous_arg(v, in.v.shape(), it);
  a.out = contiguous_arg(out, osh, DType::f64);
  a.lse = contiguous_arg(lse, lsh, DType::f64);
  DeviceBuffer cu;
  if (p.ragged()) {
    std::vector<std::int64_t> host(p.cu_seqlens_q);
    host.insert(host.end(), p.cu_seqlens_kv.begin(), p.cu_seqlens_kv.end());
    cu = DeviceBuffer(host.size() * 8);
    cu.upload(host.data(), cu.bytes());
    a.cu_q = cu.as<std::int64_t>();
    a.cu_kv = cu.as<std::int64_t>() + p.cu_seqlens_q.size();
  }
  attn_fwd_ref64(a, path);
  synchronize();
  Out o{std::vector<double>(static_cast<std::size_t>(shape_numel(osh))), std::vector<double>(static_cast<std::size_t>(shape_numel(lsh)))};
  out.download(o.out.data(), out.bytes());
  lse.download(o.lse.data(), lse.bytes());
  return o;
}

bool mma_available(const Problem& p) {
  Ref64Args a = ref64_args(p);
  return ref64_resolve(a, Ref64Path::automatic) == Ref64Path::mma;
}

class Ref64Problems : public ::testing::TestWithParam<const char*> {};

TEST_P(Ref64Problems, BothPathsMatchOracle) {
  ATTEST_REQUIRE_GPU();
  const Problem p = parse_problem(GetParam());
  const auto in = datasets::generate_qkv(p, datasets::Distribution::normal, 20240601);
  const auto want = test::oracle(p, in.q, in.k, in.v);
  expect_close(run_device(p, in, Ref64Path::portable), want, "portable " + to_string(p));
  if (mma_available(p)) expect_close(run_device(p, in, Ref64Path::mma), want, "mma " + to_string(p));
  else std::cout << "mma path not available for " << to_string(p) << "\n";
}

// f32 inputs are staged raw and widened in shared memory, f64 inputs copied as they are: the
// arithmetic after that is the same, so the same values must give the same bits on both paths.
TEST_P(Ref64Problems, F64InputsGiveTheF32InputsBits) {
  ATTEST_REQUIRE_GPU();
  const Problem p = parse_problem(GetParam());
  auto in = datasets::generate_qkv(p, datasets::Distribution::diffusion, 11);
  in.v.data<float>()[in.v.numel() / 2] = std::numeric_limits<float>::infinity();  // the exact per-row route too
  for (const Ref64Path path : {Ref64Path::portable, Ref64Path::automatic}) {
    const Out a = run_device(p, in, path, DType::f32), b = run_device(p, in, path, DType::f64);
    EXPECT_EQ(0, std::memcmp(a.out.data(), b.out.data(), a.out.size() * 8)) << path_name(path) << " " << to_string(p);
    EXPECT_EQ(0, std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 8)) << path_name(path) << " " << to_string(p);
  }
}

TEST_P(Ref64Problems, RegistryInProblemLayouts) {
  ATTEST_REQUIRE_GPU();
  const Problem base = parse_problem(GetParam());
  const auto in = datasets::generate_qkv(base, datasets::Distribution::normal, 77);
  const auto want = test::oracle(base, in.q, in.k, in.v);
  for (const Layout l : {Layout::bshd, Layout::bhsd, Layout::strided}) {
    Problem p = base;
    p.layout = l;
    p.pad = l == Layout::strided ? 5 : 0;
    expect_close(run_registry(p, in), want, "registry " + to_string(p));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Features, Ref64Problems,
    ::testing::Values("b2h4s77d64",                          // plain, S not a tile multiple
                      "b1h6k2s100t150d128:mask=causal_tl",   // GQA, cross, causal top-left
                      "b1h4k1s150t100d128:mask=causal_br",   // MQA, S > T: rows 0..49 fully masked
                      "b2h2s40t70d48v80:mask=causal_br",     // head_dim_v != head_dim (portable only)
                      "b3h2s65t100d64:mask=causal_br:cu_q=0,5,70,100:cu_kv=0,30,30,130",  // ragged, empty kv
                      "b1h3s130t33d128"),                    // more queries than keys
    [](const ::testing::TestParamInfo<const char*>& pi) { return "p" + std::to_string(pi.index); });

TEST(Ref64, PackedQkvThroughDevicePointers) {
  ATTEST_REQUIRE_GPU();
  const Problem p = parse_problem("b2h4k2s70d64:mask=causal_tl");
  const auto in = datasets::generate_qkv(p, datasets::Distribution::normal, 5);
  const std::int64_t B = 2, S = 70, H = 4, Hk = 2, D = 64, W = H + 2 * Hk;
  std::vector<float> packed(static_cast<std::size_t>(B * S * W * D));
  const auto q = in.q.view<float, 4>(), k = in.k.view<float, 4>(), v = in.v.view<float, 4>();
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t s = 0; s < S; ++s)
      for (std::int64_t d = 0; d < D; ++d) {
        float* row = packed.data() + ((b * S + s) * W) * D + d;
        for (std::int64_t h = 0; h < H; ++h) row[h * D] = q(b, s, h, d);
        for (std::int64_t h = 0; h < Hk; ++h) row[(H + h) * D] = k(b, s, h, d), row[(H + Hk + h) * D] = v(b, s, h, d);
      }
  DeviceBuffer buf(packed.size() * 4), out(static_cast<std::size_t>(B * S * H * D) * 8), lse(static_cast<std::size_t>(B * H * S) * 8);
  buf.upload(packed.data(), buf.bytes());
  out.fill_bytes(0xFF);
  lse.fill_bytes(0xFF);
  for (const Ref64Path path : {Ref64Path::portable, Ref64Path::automatic}) {
    Ref64Args a = ref64_args(p);
    for (auto [t, h0] : {std::pair{&a.q, 0L}, std::pair{&a.k, H}, std::pair{&a.v, H + Hk}}) {
      t->data = static_cast<float*>(buf.data()) + h0 * D;
      t->dtype = DType::f32;
      t->device = true;
      t->stride[0] = S * W * D, t->stride[1] = W * D, t->stride[2] = D, t->stride[3] = 1;
    }
    a.out = contiguous_arg(out, {B, S, H, D}, DType::f64);
    a.lse = contiguous_arg(lse, {B, H, S}, DType::f64);
    attn_fwd_ref64(a, path);
    synchronize();
    Out o{std::vector<double>(static_cast<std::size_t>(B * S * H * D)), std::vector<double>(static_cast<std::size_t>(B * H * S))};
    out.download(o.out.data(), out.bytes());
    lse.download(o.lse.data(), lse.bytes());
    expect_close(o, test::oracle(p, in.q, in.k, in.v), std::string("packed ") + path_name(path));
  }
}

// Non-finite K and V on a key that row 0 cannot see (causal_tl: key 1) but rows >= 1 can: row 0
// must equal the clean result (masked keys never reach the arithmetic), later rows are NaN.
TEST(Ref64, MaskedNonFiniteKeysDoNotLeak) {
  ATTEST_REQUIRE_GPU();
  for (const char* text : {"b1h1s40d64:mask=causal_tl", "b1h1s40d48:mask=causal_tl"}) {
    const Problem p = parse_problem(text);
    auto in = datasets::generate_qkv(p, datasets::Distribution::normal, 9);
    in.k.view<float, 4>()(0, 1, 0, 3) = std::numeric_limits<float>::quiet_NaN();
    in.v.view<float, 4>()(0, 1, 0, 5) = std::numeric_limits<float>::infinity();
    const auto want = test::oracle(p, in.q, in.k, in.v);
    ASSERT_TRUE(std::isfinite(static_cast<double>(want.out[0])));
    ASSERT_TRUE(std::isnan(static_cast<double>(want.out[static_cast<std::size_t>(p.head_dim_v)])));
    for (const Ref64Path path : {Ref64Path::portable, Ref64Path::automatic})
      expect_close(run_device(p, in, path), want, std::string(text) + " " + path_name(path));
  }
}

// Logits of 1e19 and more (q, k ~ 1e9): the softmax's argument scale s - max stays <= 0 with
// the row maximum's exactly 0, so its P is 1 (a base-2 form fma(s, c, -fl(c max)) left the
// exponential's domain here: out 0, LSE -inf; review of 2026-12-07).
TEST(Ref64, HugeLogitsKeepTheReference) {
  ATTEST_REQUIRE_GPU();
  for (const char* text : {"b1h2s40d64", "b1h2s300d128:mask=causal_br"}) {
    const Problem p = parse_problem(text);
    auto in = datasets::generate_qkv(p, datasets::Distribution::normal, 11);
    for (Tensor* t : {&in.q, &in.k}) {
      float* x = t->data<float>();
      for (std::int64_t i = 0; i < t->numel(); ++i) x[i] *= 1e9f;
    }
    const auto want = test::oracle(p, in.q, in.k, in.v);
    for (const Ref64Path path : {Ref64Path::portable, Ref64Path::automatic})
      expect_close(run_device(p, in, path), want, std::string(text) + " huge logits " + path_name(path));
  }
}

TEST(Ref64, RunToRunBitwise) {
  ATTEST_REQUIRE_GPU();
  const Problem p = parse_problem("b1h4k2s200t300d128:mask=causal_br");
  const auto in = datasets::generate_qkv(p, datasets::Distribution::diffusion, 3);
  for (const Ref64Path path : {Ref64Path::portable, Ref64Path::automatic}) {
    const Out a = run_device(p, in, path), b = run_device(p, in, path);
    EXPECT_EQ(0, std::memcmp(a.out.data(), b.out.data(), a.out.size() * 8)) << path_name(path);
    EXPECT_EQ(0, std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 8)) << path_name(path);
  }
}

TEST(Ref64, RefusesMmaWhenUnavailableAndBadArgs) {
  ATTEST_REQUIRE_GPU();
  const Problem p = parse_problem("b1h1s8d48v80");
  EXPECT_THROW((void)ref64_resolve(ref64_args(p), Ref64Path::mma), Error);
  EXPECT_EQ(ref64_resolve(ref64_args(p), Ref64Path::automatic), Ref64Path::portable);
  Ref64Args a = ref64_args(p);  // no tensors set
  EXPECT_THROW(attn_fwd_ref64(a), Error);
}

}  // namespace
}  // namespace attest::gpu

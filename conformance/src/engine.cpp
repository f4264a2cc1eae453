// The conformance engine on tensors where they live (engine.hpp). Device code is reached through
// kernels/gpu's plain headers when the library is built with a GPU backend (ATTEST_GPU_BACKEND);
// host tensors take the same steps with the CPU reference, so CI checks planner, block figures
// and verdicts without a GPU.
#include "attest/conformance/engine.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include "attest/conformance/accuracy.hpp"
#include "attest/conformance/check.hpp"
#include "attest/core/status.hpp"
#include "attest/metrics/tensor_metrics.hpp"
#include "attest/reference/attention.hpp"
#include "attest/reference/emulate.hpp"

#ifdef ATTEST_GPU_BACKEND
#include "attest/kernels/gpu/attn_fwd_ref64.hpp"
#include "attest/kernels/gpu/compare.hpp"
#include "attest/kernels/gpu/device.hpp"
#include "attest/kernels/gpu/emu_prepare.hpp"
#include "attest/kernels/gpu/generate_qkv.hpp"
#endif

namespace attest::conformance::engine {
namespace {

using nlohmann::json;
using i64 = std::int64_t;

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

[[noreturn, maybe_unused]] void no_gpu(const char* what) {
  throw Error(fmt::format("{}: device tensors need attest built with a GPU backend; this one was built with "
                          "ATTEST_GPU=none (scripts/device/build py-cuda builds the CUDA one)",
                          what));
}

void expect_shape(const TensorRef& v, const char* name, std::initializer_list<i64> want) {
  int i = 0;
  for (const i64 w : want) {
    if (v.shape[i] != w)
      throw Error(fmt::format("tensor '{}': shape [{}, {}, {}, {}] does not match the problem (dimension {} should be {})", name,
                              v.shape[0], v.shape[1], v.shape[2], v.shape[3], i, w));
    ++i;
  }
}

// Logical index e of a ref's shape as (i0, i1, i2, i3).
std::array<i64, 4> unravel(const TensorRef& v, i64 e) {
  return {e / (v.shape[3] * v.shape[2] * v.shape[1]), (e / (v.shape[3] * v.shape[2])) % v.shape[1],
          (e / v.shape[3]) % v.shape[2], e % v.shape[3]};
}

std::string index_of(const TensorRef& v, i64 e) {
  const auto i = unravel(v, e);
  return fmt::format("[{},{},{},{}]", i[0], i[1], i[2], i[3]);
}

// Byte range [lo, hi) a ref's elements span.
std::pair<std::uintptr_t, std::uintptr_t> extent(const TensorRef& v) {
  const auto base = reinterpret_cast<std::uintptr_t>(v.data);
  const auto size = static_cast<i64>(dtype_size(v.dtype));
  i64 lo = 0, hi = 0;
  for (int i = 0; i < 4; ++i) {
    if (v.shape[i] == 0) return {base, base};
    (v.stride[i] < 0 ? lo : hi) += (v.shape[i] - 1) * v.stride[i];
  }
  return {base + static_cast<std::uintptr_t>(lo * size), base + static_cast<std::uintptr_t>(hi * size + size)};
}

struct Cmp {
  i64 count = 0, bit_diff = 0, nonfinite_a = 0, first = -1;
  double max_abs = 0;
};

// a against b bit for bit (b == nullptr: a scanned for NaN/Inf). Same figures on both sides.
Cmp compare_refs(const TensorRef& a, const TensorRef* b) {
  if (b != nullptr) {
    if (b->device != a.device) throw Error("compare: one tensor is on the device and the other on the host");
    for (int i = 0; i < 4; ++i)
      if (a.shape[i] != b->shape[i])
        throw Error(fmt::format("compare: shapes differ in dimension {} ({} vs {})", i, a.shape[i], b->shape[i]));
  }
  Cmp c;
  if (a.device) {
#ifdef ATTEST_GPU_BACKEND
    const auto f = gpu::compare_device(a, b != nullptr ? *b : TensorRef{});
    c = {f.count, f.bit_diff, f.nonfinite_a, f.first, f.max_abs};
#else
    no_gpu("compare");
#endif
    return c;
  }
  i64 e = 0;
  for (i64 i0 = 0; i0 < a.shape[0]; ++i0)
    for (i64 i1 = 0; i1 < a.shape[1]; ++i1)
      for (i64 i2 = 0; i2 < a.shape[2]; ++i2)
        for (i64 i3 = 0; i3 < a.shape[3]; ++i3, ++e) {
          // The device kernel's per-element code (elem::pair_diff), so both sides give one figure.
          const std::uint64_t ba = elem::bits(a, a.offset(i0, i1, i2, i3));
          const elem::PairDiff d = b != nullptr ? elem::pair_diff(a.dtype, ba, b->dtype, elem::bits(*b, b->offset(i0, i1, i2, i3)))
                                                : elem::pair_diff(a.dtype, ba, a.dtype, ba);
          if (d.nonfinite_a) {
            ++c.nonfinite_a;
            if (b == nullptr && c.first < 0) c.first = e;
          }
          if (b == nullptr || !d.differs) continue;
          ++c.bit_diff;
          if (c.first < 0) c.first = e;
          if (std::isfinite(d.abs_diff)) c.max_abs = std::max(c.max_abs, static_cast<double>(d.abs_diff));
        }
  c.count = e;
  return c;
}

// Error sums per (i0, i2, block of `rows` i1) of test against ref (same shapes), on the host:
// the same per-element code as the device kernel (ErrSums::add, with its flush threshold).
std::vector<ErrSums> block_errors_host(const TensorRef& t, const TensorRef& r, i64 rows, double flush_below = 0,
                                       double zero_below = 0) {
  const i64 nblk = (t.shape[1] + rows - 1) / rows;
  std::vector<ErrSums> out(static_cast<std::size_t>(t.shape[0] * t.shape[2] * nblk));
#pragma omp parallel for schedule(static)
  for (i64 id = 0; id < static_cast<i64>(out.size()); ++id) {
    const i64 blk = id % nblk, i2 = (id / nblk) % t.shape[2], i0 = id / (nblk * t.shape[2]);
    ErrSums s;
    for (i64 i1 = blk * rows; i1 < std::min(t.shape[1], blk * rows + rows); ++i1)
      for (i64 i3 = 0; i3 < t.shape[3]; ++i3)
        s.add(elem::load(t, t.offset(i0, i1, i2, i3)), elem::load(r, r.offset(i0, i1, i2, i3)), flush_below, zero_below);
    out[static_cast<std::size_t>(id)] = s;
  }
  return out;
}

// A sub-ref: the logical block starting at `lo` with extents `n`.
TensorRef sub(const TensorRef& t, std::array<i64, 4> lo, std::array<i64, 4> n) {
  TensorRef s = t;
  s.data = static_cast<const std::byte*>(t.data) +
           t.offset(lo[0], lo[1], lo[2], lo[3]) * static_cast<i64>(dtype_size(t.dtype));
  for (int i = 0; i < 4; ++i) s.shape[i] = n[static_cast<std::size_t>(i)];
  return s;
}

double rel(double num_sq, double den_sq) {
  if (den_sq > 0) return std::sqrt(num_sq / den_sq);
  return num_sq > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}
double rel_l2(const ErrSums& s) { return rel(s.sum_sq, s.ref_sq); }
double max_rel(const ErrSums& s) {
  if (s.ref_max > 0) return s.max_abs / s.ref_max;
  return s.max_abs > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

// `flushing`: the sums were taken with a flush threshold (JudgeRequest::flush_below).
json sums_json(const ErrSums& s, bool flushing = false) {
  json j{{"rel_l2", json_number(rel_l2(s))},
         {"max_rel", json_number(max_rel(s))},
         {"max_abs", json_number(s.max_abs)},
         {"ref_max_abs", json_number(s.ref_max)},
         {"elements", s.count},
         {"nonfinite", s.nonfinite_test},
         {"ref_nonzero", s.nonzero_ref},
         {"zero_where_ref_nonzero", s.zero_test}};
  if (flushing) j["flushed_normal"] = s.flushed_normal;
  return j;
}

// Every |x| < flush_below of a host f32 / f64 tensor set to zero, sign kept (JudgeRequest::flush_below).
void flush_in_place(Tensor& t, double flush_below) {
  if (t.empty()) return;
  t = t.contiguous();
  if (t.dtype() == DType::f64) {
    for (double& x : std::span(t.data<double>(), static_cast<std::size_t>(t.numel())))
      if (std::fabs(x) < flush_below) x = std::copysign(0.0, x);
  } else {
    for (float& x : std::span(t.data<float>(), static_cast<std::size_t>(t.numel())))
      if (std::fabs(x) < flush_below) x = std::copysign(0.0f, x);
  }
}

// Where the kernel's output `k` (f32, the same rows) is zero and |ref| < zero_below, ref set to zero
// (sign kept): a declared-ftz zero within what flushing can remove (JudgeRequest::flush_below).
void zero_where_flushed(Tensor& ref, const Tensor& k, double zero_below) {
  if (ref.empty() || zero_below <= 0) return;
  const float* kv = k.data<float>();
  const auto fix = [&](auto* x) {
    for (std::int64_t i = 0; i < ref.numel(); ++i)
      if (kv[i] == 0 && std::fabs(x[i]) < zero_below) x[i] = std::copysign(decltype(+x[i]){0}, x[i]);
  };
  if (ref.dtype() == DType::f64) fix(ref.data<double>());
  else fix(ref.data<float>());
}

// The FP64 reference of the whole problem, compared with `out` block by block. Device: gpu.ref64
// on the caller's buffers, a chunk of heads at a time into a scratch of `scratch_bytes`; host:
// the CPU reference on the whole problem. `flush_below`: ErrSums::add's.
std::vector<ErrSums> complete_errors(const Problem& p, const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                     const TensorRef& out, i64 rows, i64 scratch_bytes, double flush_below,
                                     double zero_below, json& info) {
  const i64 B = p.batch, H = p.heads_q, S = p.seqlen_q, Dv = p.head_dim_v;
  const i64 nblk = (S + rows - 1) / rows;
  std::vector<ErrSums> all(static_cast<std::size_t>(B * H * nblk));
  if (!out.device) {
    const i64 lo[4] = {0, 0, 0, 0};
    const i64 hq[4] = {B, S, H, p.head_dim}, hk[4] = {B, p.seqlen_kv, p.heads_kv, p.head_dim},
              hv[4] = {B, p.seqlen_kv, p.heads_kv, Dv};
    const auto r = ref::attention(p, gather(q, lo, hq), gather(k, lo, hk), gather(v, lo, hv), ref::Precision::fp64);
    all = block_errors_host(out, ref_of(r.out), rows, flush_below, zero_below);
    info = {{"reference", "ref::attention fp64 (host)"}, {"chunks", 1}};
    return all;
  }
#ifdef ATTEST_GPU_BACKEND
  const i64 group = p.heads_q / p.heads_kv;
  if (q.dtype != DType::f32 || k.dtype != DType::f32 || v.dtype != DType::f32)
    throw Error("device inputs q, k, v must be float32 (the generated tensors, before the kernel's cast)");
  const i64 per_head = S * Dv * static_cast<i64>(sizeof(double));
  const i64 hc = std::min(H, std::max<i64>(1, scratch_bytes / std::max<i64>(1, per_head * group)) * group);
  gpu::DeviceBuffer scratch(static_cast<std::size_t>(hc * per_head));
  std::vector<ErrSums> chunk(static_cast<std::size_t>(hc * nblk));
  i64 chunks = 0;
  for (i64 b = 0; b < B; ++b)
    for (i64 h0 = 0; h0 < H; h0 += hc) {
      const i64 n = std::min(hc, H - h0);
      gpu::Ref64Args a = gpu::ref64_args(p);
      a.batch = 1;
      a.heads_q = n;
      a.heads_kv = n / group;
      const auto dt = [](const TensorRef& x, i64 bb, i64 hh) {
        return sub(x, {bb, 0, hh, 0}, {1, 1, 1, 1});  // f32 device tensor from generate_inputs
      };
      a.q = dt(q, b, h0);
      a.k = dt(k, b, h0 / group);
      a.v = dt(v, b, h0 / group);
      a.out.data = scratch.data();
      a.out.dtype = DType::f64;
      a.out.device = true;
      a.out.stride[0] = S * n * Dv;
      a.out.stride[1] = n * Dv;
      a.out.stride[2] = Dv;
      a.out.stride[3] = 1;
      gpu::attn_fwd_ref64(a);
      TensorRef r;
      r.data = scratch.data();
      r.dtype = DType::f64;
      r.device = true;
      const i64 shp[4] = {1, S, n, Dv}, str[4] = {S * n * Dv, n * Dv, Dv, 1};
      for (int i = 0; i < 4; ++i) r.shape[i] = shp[i], r.stride[i] = str[i];
      gpu::block_errors_device(sub(out, {b, 0, h0, 0}, {1, S, n, Dv}), r, rows, chunk.data(), flush_below, zero_below);
      for (i64 h = 0; h < n; ++h)
        std::copy_n(chunk.begin() + h * nblk, nblk, all.begin() + ((b * H + h0 + h) * nblk));
      ++chunks;
    }
  info = {{"reference", "gpu.ref64 (device buffers)"}, {"chunks", chunks}, {"heads_per_chunk", hc},
          {"scratch_bytes", hc * per_head}};
  return all;
#else
  (void)scratch_bytes;
  no_gpu("reference");
#endif
}

// Error sums of test against ref over all of their elements (host refs of one planned block).
ErrSums sums_of(const TensorRef& t, const TensorRef& r) {
  ErrSums s;
  for (const auto& x : block_errors_host(t, r, std::max<i64>(1, t.shape[1]))) s.merge(x);
  return s;
}

// Bitwise on the planned blocks (the gate's check_bitwise rule).
Outcome judge_bitwise(const Recipe& recipe, const Tensor& K, const ref::EmulatorOutput& emu, const Plan& plan) {
  if (!recipe.bitwise_capable()) return {Verdict::unsupported, "recipe uses hardware exp2: no bitwise model exists", json::object()};
  if (const auto ce = metrics::compare(emu.out, emu.out, 0); ce.norm_ref == 0 && ce.nan_ref == 0)
    return {Verdict::mistrusted, "emulator output is all zero: bitwise equality would prove nothing", json::object()};
  const auto m = metrics::compare(K, emu.out, 8);
  json fig;
  metrics::to_json(fig["out"], m);
  if (m.bit_mismatches == 0) return {Verdict::passed, "", fig};
  const auto& mm = m.first_mismatches.front();
  // The planned row index maps back to (b, s, h) of the whole output.
  const i64 row = mm.index.size() > 1 ? mm.index[1] : 0;
  i64 at = 0;
  const Slice* hit = &plan.slices.front();
  for (const auto& s : plan.slices) {
    if (row < at + (s.r1 - s.r0)) {
      hit = &s;
      break;
    }
    at += s.r1 - s.r0;
  }
  const i64 d = mm.index.size() > 3 ? mm.index[3] : 0;
  return {Verdict::failed,
          fmt::format("{} of {} {} output elements differ bitwise from the recipe emulator; first at [{},{},{},{}]: "
                      "{:.9g} vs {:.9g}",
                      m.bit_mismatches, m.count, plan.complete ? "" : "sampled", hit->b, hit->r0 + (row - at), hit->h, d,
                      mm.test, mm.ref),
          fig};
}

// The input guard's row: FAILED naming every input whose fingerprint changed over `what`.
struct Fingerprint {
  std::string name;
  std::uint64_t before = 0, after = 0;
};

Result input_guard(const Case& c, const std::string& what, const std::vector<Fingerprint>& inputs) {
  std::vector<std::string> changed;
  json fig = json::object();
  for (const auto& f : inputs) {
    fig[f.name] = {{"before", fmt::format("{:016x}", f.before)}, {"after", fmt::format("{:016x}", f.after)}};
    if (f.before != f.after) changed.push_back(f.name);
  }
  fig["what"] = what;
  if (changed.empty()) return make_result(c, "input_guard", {Verdict::passed, "", fig}, 0);
  return make_result(c, "input_guard",
                     {Verdict::failed,
                      fmt::format("{}: the callable wrote into its input{} {} (fingerprints differ; declare mutates_inputs=True "
                                  "to have attest hand it copies)",
                                  what, changed.size() > 1 ? "s" : "", fmt::join(changed, ", ")),
                      fig},
                     0);
}

}  // namespace

json block_figures(const TensorRef& test, const TensorRef& ref, std::int64_t rows) {
  for (int i = 0; i < 4; ++i)
    if (test.shape[i] != ref.shape[i]) throw Error(fmt::format("block_figures: shapes differ in dimension {}", i));
  std::vector<ErrSums> blocks;
  if (test.device) {
#ifdef ATTEST_GPU_BACKEND
    const i64 nblk = (test.shape[1] + rows - 1) / rows;
    blocks.resize(static_cast<std::size_t>(test.shape[0] * test.shape[2] * nblk));
    gpu::block_errors_device(test, ref, rows, blocks.data());
#else
    no_gpu("block_figures");
#endif
  } else {
    blocks = block_errors_host(test, ref, rows);
  }
  const i64 nblk = (test.shape[1] + rows - 1) / rows;
  ErrSums whole;
  i64 worst = -1, nonfinite = 0;
  double w = -1;
  for (i64 id = 0; id < static_cast<i64>(blocks.size()); ++id) {
    const ErrSums& s = blocks[static_cast<std::size_t>(id)];
    whole.merge(s);
    nonfinite += s.nonfinite_test > 0 ? 1 : 0;
    const double r = std::isnan(rel_l2(s)) ? std::numeric_limits<double>::infinity() : rel_l2(s);
    if (r > w) w = r, worst = id;
  }
  json j{{"count", blocks.size()}, {"rows_per_block", rows}, {"nonfinite_blocks", nonfinite}, {"whole", sums_json(whole)}};
  if (worst >= 0) {
    const i64 blk = worst % nblk, h = (worst / nblk) % test.shape[2], b = worst / (nblk * test.shape[2]);
    j["worst"] = sums_json(blocks[static_cast<std::size_t>(worst)]);
    j["worst"]["at"] = {{"batch", b}, {"head", h}, {"rows", {blk * rows, std::min(test.shape[1], blk * rows + rows)}}};
  }
  return j;
}

TensorRef ref_of(const Tensor& t) {
  if (t.rank() != 4) throw Error(fmt::format("ref_of: tensor of rank {} where 4 is expected", t.rank()));
  if (t.dtype() != DType::f32 && t.dtype() != DType::bf16 && t.dtype() != DType::f16 && t.dtype() != DType::f64)
    throw Error(fmt::format("ref_of: element type {} is not f64, f32, bf16 or f16", dtype_name(t.dtype())));
  TensorRef r;
  r.data = t.raw();
  r.dtype = t.dtype();
  for (int i = 0; i < 4; ++i) {
    r.shape[i] = t.dim(i);
    r.stride[i] = t.strides()[static_cast<std::size_t>(i)];
  }
  return r;
}

Tensor gather(const TensorRef& v, const std::int64_t lo[4], const std::int64_t hi[4]) {
  Tensor t(DType::f32, {hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2], hi[3] - lo[3]});
  if (v.device) {
#ifdef ATTEST_GPU_BACKEND
    gpu::gather_f32(v, lo, hi, t.data<float>());
#else
    no_gpu("gather");
#endif
    return t;
  }
  float* o = t.data<float>();
  for (i64 a = lo[0]; a < hi[0]; ++a)
    for (i64 b = lo[1]; b < hi[1]; ++b)
      for (i64 c = lo[2]; c < hi[2]; ++c)
        for (i64 d = lo[3]; d < hi[3]; ++d) *o++ = static_cast<float>(elem::load(v, v.offset(a, b, c, d)));
  return t;
}

Tensor concat_rows(const std::vector<Tensor>& parts) {
  i64 total = 0;
  for (const auto& p : parts) total += p.dim(1);
  const auto& f = parts.front();
  Tensor out(f.dtype(), {f.dim(0), total, f.dim(2), f.dim(3)});
  const auto copy = [&]<class T>(T) {
    const auto o = out.view<T, 4>();
    i64 at = 0;
    for (const auto& p : parts) {
      const auto v = p.view<T, 4>();
      for (i64 b = 0; b < v.shape[0]; ++b)
        for (i64 s = 0; s < v.shape[1]; ++s)
          for (i64 h = 0; h < v.shape[2]; ++h)
            for (i64 d = 0; d < v.shape[3]; ++d) o(b, at + s, h, d) = v(b, s, h, d);
      at += v.shape[1];
    }
  };
  if (f.dtype() == DType::f64) copy(0.0);
  else copy(0.0f);
  return out;
}

Result make_result(const Case& c, const std::string& check, Outcome o, double seconds) {
  Case cc = c;
  cc.check = check;
  Result r;
  r.descriptor = to_string(cc);
  r.kernel = c.kernel;
  r.recipe = recipe_label(c.recipe);
  r.problem = to_string(c.problem);
  r.dist = std::string(datasets::distribution_name(c.dist));
  r.check = check;
  r.seed = c.seed;
  r.outcome = std::move(o);
  r.seconds = seconds;
  return r;
}

std::string plan_refusal(const Problem& p, const std::string& causal) {
  if (p.ragged()) return "ragged (varlen) problems are not taken by the device engine";
  if (p.mask != Mask::none && p.seqlen_q > p.seqlen_kv)
    return fmt::format("mask {} with seqlen_q {} > seqlen_kv {} clips the key range of some rows: the device engine does "
                       "not take such problems", mask_name(p.mask), p.seqlen_q, p.seqlen_kv);
  if (p.mask != Mask::none && p.seqlen_q != p.seqlen_kv && (p.mask == Mask::causal_tl) != (causal == "top_left"))
    return fmt::format("mask {} with seqlen_q != seqlen_kv: the kernel's causal convention is {} (causal= declaration)",
                       mask_name(p.mask), causal);
  return {};
}

namespace {

// The recipe the emulator runs: hardware exp2 has no bitwise model, so its accuracy budget is the
// correctly rounded exp2's (as the gate's Context does); bitwise is UNSUPPORTED for it.
Recipe emulated(const Recipe& r) {
  Recipe er = r;
  if (er.exp2 == Exp2Policy::hw) er.exp2 = Exp2Policy::cr;
  return er;
}

// Input quantizers that act element by element (plain bf16 / fp16 casts, f32): a block's
// emulation as a sub-problem of its own (its rows, the keys they see) is then exactly the whole
// problem's restricted to the block, with no pass over the whole inputs. Every other scheme
// (INT8, FP8, MX, or a cast with a rotation) has scales or means over rows outside the block:
// those recipes are emulated against the whole problem's quantized operands (ref::prepare).
bool element_wise(const Recipe& r) {
  for (const Scheme* s : {&r.q, &r.k, &r.v})
    if (*s != default_scheme("bf16") && *s != default_scheme("fp16") && *s != default_scheme("f32")) return false;
  return true;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

double prepare_host_bytes(const Problem& p, const Recipe& r) {
  if (element_wise(r)) return 0;
  const double nq = static_cast<double>(p.batch * p.seqlen_q * p.heads_q * p.head_dim),
               nk = static_cast<double>(p.batch * p.seqlen_kv * p.heads_kv * p.head_dim),
               nv = static_cast<double>(p.batch * p.seqlen_kv * p.heads_kv * p.head_dim_v);
  // The float32 copies (4) and, the operands being quantized concurrently, every quantizer's
  // working copy and codes at once (5), plus the float copy of q that K smoothing keeps (its own
  // contiguous copy: 4 more per element of q). Measured peaks are 0.7-0.8x of this.
  const Recipe er = emulated(r);
  const bool smooth = er.k.family != Scheme::Family::identity && er.k.smooth != Scheme::Smoothing::none;
  return static_cast<double>(ref::prepared_bytes(p, er)) + 9 * (nq + nk + nv) + (smooth ? 4 * nq : 0.0);
}

std::string recipe_refusal(const Recipe& r) {
  // The recipe's own fields on a nominal problem (head_dim 128); refusal() asks again with the
  // case's problem (int8 head_dim limit, a rotation's head_dim).
  if (auto why = ref::emulate_refusal(parse_problem("b1h1s64d128"), emulated(r)); !why.empty())
    return fmt::format("recipe {}: the emulator does not model it ({})", recipe_label(r), why);
  return {};
}

// Block `blk` of `rows` query rows of (b, h), with the keys its last row sees.
Slice block_slice(const Problem& p, std::int64_t rows, std::int64_t b, std::int64_t h, std::int64_t blk) {
  Slice s{b, h, blk * rows, std::min(p.seqlen_q, blk * rows + rows), 0};
  s.kend = std::clamp<std::int64_t>(p.visible_keys(b, s.r1 - 1), 0, p.seqlen_kv);
  return s;
}

// std::mt19937_64 is specified bit for bit by the standard and draws are reduced by `%`, so a
// seed names the same sample on every platform (std::uniform_int_distribution is not).
Plan plan_blocks(const Problem& p, const SampleArgs& sa, std::uint64_t seed, std::int64_t tile_kv) {
  if (const auto why = plan_refusal(p, sa.causal); !why.empty()) throw Error(why);
  Plan plan;
  plan.rows = sa.rows;
  const i64 rows = sa.rows, S = p.seqlen_q, T = p.seqlen_kv, B = p.batch, H = p.heads_q;
  const i64 nb = (S + rows - 1) / rows;
  const auto make = [&](i64 b, i64 h, i64 blk) { return block_slice(p, rows, b, h, blk); };
  const auto key = [](const Slice& s) { return std::tuple{s.b, s.h, s.r0}; };
  const auto work = [&](const Slice& s) { return static_cast<double>(s.r1 - s.r0) * s.kend * (p.head_dim + p.head_dim_v); };
  double per_bh = 0;
  for (i64 blk = 0; blk < nb; ++blk) per_bh += work(make(0, 0, blk));
  plan.macs_total = per_bh * B * H;
  plan.kv_tiles = (T + tile_kv - 1) / tile_kv;
  if (plan.macs_total <= sa.max_macs) {
    plan.complete = true;
    for (i64 b = 0; b < B; ++b)
      for (i64 h = 0; h < H; ++h)
        for (i64 blk = 0; blk < nb; ++blk) plan.slices.push_back(make(b, h, blk));
  } else {
    std::set<std::tuple<i64, i64, i64>> seen;
    const auto add = [&](const Slice& s) {
      if (seen.insert(key(s)).second) plan.slices.push_back(s);
    };
    // Block 0 of (0,0) and the last block of (B-1, H-1), whose rows see every key: every KV tile
    // boundary and the partial last tile, with or without a causal mask.
    add(make(0, 0, 0));
    add(make(B - 1, H - 1, nb - 1));
    double used = 0;
    for (const auto& s : plan.slices) used += work(s);
    std::mt19937_64 rng(seed ^ 0x5A4D504C45ull);  // "ZMPLE": the sample's stream, apart from the data's Philox
    const i64 all = B * H * nb;
    for (i64 tries = 0; tries < 4 * all && static_cast<i64>(seen.size()) < all; ++tries) {
      const auto r = static_cast<i64>(rng() % static_cast<std::uint64_t>(all));
      const Slice s = make(r / (H * nb), (r / nb) % H, r % nb);
      if (seen.count(key(s)) != 0) continue;
      if (used + work(s) > sa.max_macs) break;
      used += work(s);
      add(s);
    }
    std::sort(plan.slices.begin(), plan.slices.end(), [&](const Slice& x, const Slice& y) { return key(x) < key(y); });
  }
  i64 kmax = 0;
  for (const auto& s : plan.slices) {
    plan.macs_sampled += work(s);
    kmax = std::max(kmax, s.kend);
    // The block becomes a cross-attention sub-problem over keys [0, kend); with a causal mask
    // (S == T) row i sees keys [0, i] = causal_br on that sub-problem. Check it, row by row.
    if (p.mask != Mask::none)
      for (i64 i = s.r0; i < s.r1; ++i)
        if (p.visible_keys(s.b, i) != s.kend - (s.r1 - 1 - i))
          throw Error(fmt::format("mask {} clips the key range of row {} (seqlen_q {} > seqlen_kv {}): the device engine "
                                  "does not take such problems", mask_name(p.mask), i, p.seqlen_q, p.seqlen_kv));
  }
  plan.kv_tiles_covered = (kmax + tile_kv - 1) / tile_kv;
  return plan;
}

json plan_json(const Plan& plan, const Problem& p, std::uint64_t seed, const SampleArgs& a) {
  json list = json::array();
  i64 rows = 0;
  for (const auto& s : plan.slices) {
    rows += s.r1 - s.r0;
    list.push_back({s.b, s.h, s.r0, s.r1});
  }
  const i64 total = p.batch * p.heads_q * p.seqlen_q;
  return json{{"complete", plan.complete},
              {"slices", plan.slices.size()},
              {"rows_per_block", plan.rows},
              {"rows_sampled", rows},
              {"rows_total", total},
              {"fraction", static_cast<double>(rows) / static_cast<double>(std::max<i64>(1, total))},
              {"macs_sampled", plan.macs_sampled},
              {"macs_total", plan.macs_total},
              {"max_macs", a.max_macs},
              {"kv_tiles", plan.kv_tiles},
              {"kv_tiles_covered", plan.kv_tiles_covered},
              {"seed", seed},
              {"blocks", list},
              {"repro", fmt::format("sample_rows={} sample_macs={:.0f}", plan.rows, a.max_macs)}};
}

std::string refusal(const Case& c, const SampleArgs& a) {
  if (auto why = recipe_refusal(c.recipe); !why.empty()) return why;
  if (auto why = ref::emulate_refusal(c.problem, emulated(c.recipe)); !why.empty())
    return fmt::format("recipe {} on problem {}: the emulator does not model it ({})", recipe_label(c.recipe),
                       to_string(c.problem), why);
  if (const double need = prepare_host_bytes(c.problem, c.recipe); need > a.max_host_bytes)
    return fmt::format(
        "recipe {} quantizes the whole problem on the host before its blocks are emulated: about {:.1f} GiB "
        "for problem {} (the inputs as float32 and the quantized operands), above the limit of {:.1f} GiB "
        "(SampleArgs::max_host_bytes)",
        recipe_label(c.recipe), need / kGiB, to_string(c.problem), a.max_host_bytes / kGiB);
  try {
    (void)plan_blocks(c.problem, a, c.seed, c.recipe.tile_kv);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

Report refuse_all(const Case& c, const std::vector<std::string>& checks, const std::string& why) {
  Report r;
  for (const auto& ch : checks) r.results.push_back(make_result(c, ch, {Verdict::unsupported, why, json::object()}, 0));
  return r;
}

#ifdef ATTEST_GPU_BACKEND
namespace {

// gpu.emu (kernels/gpu/attn_fwd_emu.hpp) as the blocks' emulator on the device. Stage 0 runs on
// the host from the whole q, k, v (gpu.emu's host stage, once per judge()) and is uploaded once;
// emulate() launches the given blocks as work items four times (emulator and floor twin, rounded
// and not). gpu.emu is bitwise equal to ref::emulate on the whole problem (gpu_emu_tests), so the
// rows are the host emulator's.
class DeviceEmulator {
 public:
  // Why gpu.emu does not take (p, r) in this program (empty: it does).
  static std::string refusal(const Problem& p, const Recipe& r) {
    const gpu::EmuHostStage& st = gpu::emu_host_stage();
    if (st.prepare == nullptr) return "gpu.emu's host stage (the gpu_emu kernel group) is not linked into this program";
    return st.unsupported(p, r);
  }
  DeviceEmulator(const Problem& p, const Recipe& r, const Tensor& q, const Tensor& k, const Tensor& v)
      : p_(p), twin_tile_kv_(gpu::emu_host_stage().twin_tile_kv(r)) {
    gpu::EmuHost hs = gpu::emu_host_stage().prepare(p, r, q, k, v);
    hs.items.clear();  // the items, and the scratch they need, are emulate()'s
    hs.params.n_items = 0;
    run_ = gpu::emu_upload(hs);
  }
  // {emulator out, out_unrounded, floor twin out, out_unrounded}: per slice its rows, f32 [1, r1 - r0, 1, Dv].
  std::array<std::vector<Tensor>, 4> emulate(const std::vector<Slice>& slices) const {
    std::vector<gpu::EmuItem> items;
    for (const auto& s : slices) items.push_back({s.b, s.h, s.r0, s.r1});
    gpu::EmuParams ep = run_.params;
    gpu::DeviceBuffer di(std::max<std::size_t>(1, items.size() * sizeof(gpu::EmuItem)));
    if (!items.empty()) di.upload(items.data(), items.size() * sizeof(gpu::EmuItem));
    ep.items = di.as<gpu::EmuItem>();
    ep.n_items = static_cast<i64>(items.size());
    ep.tile_kv = std::max(run_.params.tile_kv, twin_tile_kv_);  // the larger tile sizes the scratch
    gpu::DeviceBuffer scratch(static_cast<std::size_t>(std::max<i64>(1, gpu::emu_scratch_floats(ep))) * 4);
    ep.scratch = scratch.as<float>();
    // The device output, dense [B, S, H, Dv] (EmuBatch::out_row0 = b * S); only the items' rows are written.
    TensorRef o;
    o.data = ep.out;
    o.device = true;
    const i64 S = p_.seqlen_q, H = p_.heads_q, Dv = p_.head_dim_v;
    const i64 shape[4] = {p_.batch, S, H, Dv}, stride[4] = {S * H * Dv, H * Dv, Dv, 1};
    std::copy_n(shape, 4, o.shape);
    std::copy_n(stride, 4, o.stride);
    std::array<std::vector<Tensor>, 4> res;
    for (int i = 0; i < 4; ++i) {
      ep.reverse_kv = i >= 2;
      ep.tile_kv = i >= 2 ? twin_tile_kv_ : run_.params.tile_kv;
      ep.out_round = i % 2 == 0 && run_.params.out_round;
      gpu::attn_fwd_emu(ep);
      gpu::synchronize();
      for (const auto& s : slices) {
        const i64 lo[4] = {s.b, s.r0, s.h, 0}, hi[4] = {s.b + 1, s.r1, s.h + 1, p_.head_dim_v};
        res[static_cast<std::size_t>(i)].push_back(gather(o, lo, hi));
      }
    }
    unsigned undecided = 0;
    for (const auto& b : run_.buffers)
      if (b.data() == run_.params.undecided) b.download(&undecided, sizeof undecided);
    if (undecided != 0)
      throw Error("gpu.emu: an exp2=cr argument lay too close to a float rounding boundary for the device's "
                  "double-double evaluation");
    return res;
  }

 private:
  Problem p_;
  i64 twin_tile_kv_;
  gpu::EmuRun run_;
};

}  // namespace
#endif

Report judge(const JudgeRequest& req) {
  const auto t_all = std::chrono::steady_clock::now();
  const Case& c = req.c;
  const Problem& p = c.problem;
  for (const auto& ch : req.checks)
    if (ch != "accuracy" && ch != "bitwise")
      throw Error(fmt::format("judge: check '{}' is not accuracy or bitwise (determinism and call_path: same)", ch));
  const ToleranceTable& tol = req.tolerances != nullptr ? *req.tolerances : ToleranceTable::builtin();
  const SampleArgs& sa = req.sample;
  if (const auto why = refusal(c, sa); !why.empty()) return refuse_all(c, req.checks, why);
  const Plan plan = plan_blocks(p, sa, c.seed, c.recipe.tile_kv);
  const TensorRef &q = req.q, &k = req.k, &v = req.v, &out = req.out;
  if (q.device != out.device || k.device != out.device || v.device != out.device)
    throw Error("judge: q, k, v and out must all be device tensors or all host tensors");
  expect_shape(q, "q", {p.batch, p.seqlen_q, p.heads_q, p.head_dim});
  expect_shape(k, "k", {p.batch, p.seqlen_kv, p.heads_kv, p.head_dim});
  expect_shape(v, "v", {p.batch, p.seqlen_kv, p.heads_kv, p.head_dim_v});
  expect_shape(out, "out", {p.batch, p.seqlen_q, p.heads_q, p.head_dim_v});
  json sample = plan_json(plan, p, c.seed, sa);

  const Recipe er = emulated(c.recipe);
  double t_gather = 0, t_ref = 0, t_emu = 0, t_prepare = 0;
  // The gate runs its groups with OpenMP single-threaded (gate.cpp); its device oracles ask for a
  // team here (SampleArgs::threads), where the emulated blocks are most of the work.
  const int threads = sa.threads > 0 ? sa.threads : omp_get_max_threads();
  // A quantized recipe: the whole problem's inputs to the host once (device refs are copied),
  // quantized there once; every emulated block then runs its rows against those operands.
  std::optional<ref::Prepared> prepared;
  // Device tensors: the blocks emulated by gpu.emu on the device where it takes the recipe (the
  // whole problem quantized on the host once, as above, by gpu.emu's host stage), else on the host.
  std::string emulator_why;  // why the host emulator runs on device tensors
  bool on_device = false;
#ifdef ATTEST_GPU_BACKEND
  std::optional<DeviceEmulator> device_emu;
  if (q.device) {
    const char* env = std::getenv("ATTEST_ENGINE_EMULATOR");
    if (!sa.device_emulator || (env != nullptr && std::string(env) == "host"))
      emulator_why = "forced (SampleArgs::device_emulator false or ATTEST_ENGINE_EMULATOR=host)";
    else
      emulator_why = DeviceEmulator::refusal(p, er);
    // A cast recipe's host emulation reads only its planned blocks; gpu.emu's host stage reads the
    // whole problem (about 8 ns an element, three operands side by side, against about 1 ns a
    // multiply-add of the host emulator on a 16-core GPU host; H100 runs 2026-12-07). Where the
    // whole problem costs more than the planned work, the host emulator stays (the Wan call's
    // sampled plan: 1.16e9 elements against 2^33 multiply-adds). Below 2^26 elements (about half a
    // second of host stage) the device emulator always runs.
    const double elems = static_cast<double>(q.numel() + k.numel() + v.numel());
    if (emulator_why.empty() && element_wise(er) && elems > 67108864.0 && elems * 8.0 > plan.macs_sampled)
      emulator_why = fmt::format(
          "cast recipe: gpu.emu's host stage over the whole problem ({:.3g} elements, ~8 ns each) costs more than "
          "the host emulator on the planned blocks ({:.3g} multiply-adds, ~1 ns each)",
          elems, plan.macs_sampled);
    on_device = emulator_why.empty();
  }
#endif
  if (!element_wise(er) || on_device) {
    auto t0 = std::chrono::steady_clock::now();
    const i64 lo[4] = {0, 0, 0, 0}, hq[4] = {p.batch, p.seqlen_q, p.heads_q, p.head_dim},
              hk[4] = {p.batch, p.seqlen_kv, p.heads_kv, p.head_dim},
              hv[4] = {p.batch, p.seqlen_kv, p.heads_kv, p.head_dim_v};
    const Tensor qw = gather(q, lo, hq), kw = gather(k, lo, hk), vw = gather(v, lo, hv);
    t_gather += since(t0);
    t0 = std::chrono::steady_clock::now();
    try {
#ifdef ATTEST_GPU_BACKEND
      if (on_device) device_emu.emplace(p, er, qw, kw, vw);
#endif
      if (!on_device) prepared.emplace(ref::prepare(p, er, qw, kw, vw));
    } catch (const std::exception& e) {
      throw Error(std::string("emulator: ") + e.what());
    }
    t_prepare = since(t0);
  }
  // Declared ftz: a kernel that flushes does so in its inputs, products and partial sums too, so a
  // zero output may stand for up to T * flush_below of FP64 value (each of T keys loses less than
  // flush_below; row sum >= 1). Zeros below 2 (T + 1) flush_below count as flushed (their
  // reference zeroed with them: ErrSums::add's zero_below, zero_where_flushed); beyond it a zero
  // fails (below).
  const double zero_bound = req.flush_below > 0 ? 2.0 * static_cast<double>(p.seqlen_kv + 1) * req.flush_below : 0.0;
  // The blocks' rows, concatenated: the kernel's (K), the FP64 reference's, the emulator's and
  // its floor twin's. `parts` keeps each block's sub-problem (its row count: its rows there).
  struct Part {
    Problem ps;
    Tensor qh, kh, vh;
  };
  struct Emulated {
    std::vector<Part> parts;
    ref::AttentionOutput ref;
    ref::EmulatorOutput emu, rev;
    Tensor K;
  };
  // Per block of `slices`: its rows of q, out and the reference, its keys (gathered from the caller's
  // buffers), and the sub-problem (one head, rows [r0, r1), keys [0, kend)).
  const auto emulate_slices = [&](const std::vector<Slice>& slices) {
    std::vector<Part> parts;
    std::vector<Tensor> kt, rt;
    std::map<std::tuple<i64, i64, i64>, std::pair<Tensor, Tensor>> keys;
    const i64 group = p.heads_q / p.heads_kv;
    for (const auto& s : slices) {
      const i64 g = s.h / group, n = s.r1 - s.r0;
      Part part;
      Problem& ps = part.ps;
      ps = p;
      ps.batch = 1;
      ps.heads_q = ps.heads_kv = 1;
      ps.seqlen_q = n;
      ps.seqlen_kv = s.kend;
      ps.mask = p.mask == Mask::none ? Mask::none : Mask::causal_br;
      ps.softmax_scale = p.scale();
      auto t0 = std::chrono::steady_clock::now();
      const i64 lq[4] = {s.b, s.r0, s.h, 0}, hq[4] = {s.b + 1, s.r1, s.h + 1, p.head_dim};
      part.qh = gather(q, lq, hq);
      // Keys of (b, kv head, kend) once: blocks of one head (and GQA groups) share them.
      auto [it, fresh] = keys.try_emplace(std::tuple{s.b, g, s.kend});
      if (fresh) {
        const i64 lk[4] = {s.b, 0, g, 0}, hk[4] = {s.b + 1, s.kend, g + 1, p.head_dim},
                  hv[4] = {s.b + 1, s.kend, g + 1, p.head_dim_v};
        it->second = {gather(k, lk, hk), gather(v, lk, hv)};
      }
      part.kh = it->second.first;
      part.vh = it->second.second;
      const i64 lo[4] = {s.b, s.r0, s.h, 0}, ho[4] = {s.b + 1, s.r1, s.h + 1, p.head_dim_v};
      kt.push_back(gather(out, lo, ho));
      t_gather += since(t0);
      t0 = std::chrono::steady_clock::now();
      // The block's FP64 reference on the host (the complete pass below computes every row on the
      // device; this one stays with its block's emulation, small against it).
      rt.push_back(ref::attention(ps, part.qh, part.kh, part.vh, ref::Precision::fp64).out);
      t_ref += since(t0);
      parts.push_back(std::move(part));
    }
    std::vector<Tensor> eo, eu, fo, fu;
    std::string emu_error;
    const auto t0e = std::chrono::steady_clock::now();
#ifdef ATTEST_GPU_BACKEND
    if (device_emu) {
      try {
        auto d = device_emu->emulate(slices);
        eo = std::move(d[0]), eu = std::move(d[1]), fo = std::move(d[2]), fu = std::move(d[3]);
      } catch (const std::exception& e) {
        emu_error = e.what();
      }
    } else
#endif
    if (prepared) {
      // Quantized recipe: the blocks' rows against the whole problem's operands (ref::emulate_rows,
      // rows in parallel on `threads`), bit for bit those rows of ref::emulate on the whole problem.
      std::vector<ref::RowBlock> rb;
      for (const auto& s : slices) rb.push_back({s.b, s.h, s.r0, s.r1});
      const int omp_before = omp_get_max_threads();
      omp_set_num_threads(threads);
      try {
        auto e = ref::emulate_rows(*prepared, rb);
        auto f = ref::emulate_rows(*prepared, rb, ref::floor_twin());
        eo.push_back(std::move(e.out));
        eu.push_back(std::move(e.out_unrounded));
        fo.push_back(std::move(f.out));
        fu.push_back(std::move(f.out_unrounded));
      } catch (const std::exception& e) {
        emu_error = e.what();
      }
      omp_set_num_threads(omp_before);
    } else {
      // Element-wise casts: each block as a sub-problem of its own, the emulator and its floor twin on
      // chunks of kEmuRows rows, in parallel: rows are independent in the emulator (each walks its own
      // keys), and one block alone would keep one core busy.
      constexpr i64 kEmuRows = 8;
      struct Chunk {
        std::size_t part;
        i64 a, b;
      };
      std::vector<Chunk> chunks;
      for (std::size_t i = 0; i < parts.size(); ++i)
        for (i64 a = 0; a < parts[i].ps.seqlen_q; a += kEmuRows)
          chunks.push_back({i, a, std::min(parts[i].ps.seqlen_q, a + kEmuRows)});
      eo.resize(chunks.size());
      eu.resize(chunks.size());
      fo.resize(chunks.size());
      fu.resize(chunks.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
      for (std::size_t ci = 0; ci < chunks.size(); ++ci) {
        try {
          const Chunk& ch = chunks[ci];
          const Part& part = parts[ch.part];
          Problem pc = part.ps;
          pc.seqlen_q = ch.b - ch.a;
          // causal_br keeps row r seeing keys [0, r + kend - n]: the chunk's last row ends (n - b)
          // keys before the block's.
          pc.seqlen_kv = pc.mask == Mask::none ? part.ps.seqlen_kv : part.ps.seqlen_kv - (part.ps.seqlen_q - ch.b);
          const Tensor qc = token_slice(part.qh, ch.a, ch.b);
          const Tensor kc = token_slice(part.kh, 0, pc.seqlen_kv);
          const Tensor vc = token_slice(part.vh, 0, pc.seqlen_kv);
          auto e = ref::emulate(pc, er, qc, kc, vc);
          auto f = ref::emulate(pc, er, qc, kc, vc, ref::floor_twin());
          eo[ci] = std::move(e.out);
          eu[ci] = std::move(e.out_unrounded);
          fo[ci] = std::move(f.out);
          fu[ci] = std::move(f.out_unrounded);
        } catch (const std::exception& e) {
#pragma omp critical
          if (emu_error.empty()) emu_error = e.what();
        }
      }
    }
    if (!emu_error.empty()) throw Error("emulator: " + emu_error);
    t_emu += since(t0e);

    Emulated r;
    r.ref.out = concat_rows(rt);
    r.emu.out = concat_rows(eo);
    r.emu.out_unrounded = concat_rows(eu);
    r.rev.out = concat_rows(fo);
    r.rev.out_unrounded = concat_rows(fu);
    r.K = concat_rows(kt);
    r.parts = std::move(parts);
    // A kernel that declares ftz: the references flushed as its outputs are, and its own
    // subnormal-range outputs with them (ErrSums::add does the same on every row).
    if (req.flush_below > 0) {
      for (Tensor* t : {&r.ref.out, &r.emu.out, &r.emu.out_unrounded, &r.rev.out, &r.rev.out_unrounded, &r.K})
        flush_in_place(*t, req.flush_below);
      zero_where_flushed(r.ref.out, r.K, zero_bound);
    }
    return r;
  };
  // The gate's rule on an emulated set. Flushed, rows whose every FP64 output is below the
  // threshold leave nothing to measure (judge_accuracy would mistrust a reference of norm 0):
  // they pass when the kernel's are flushed too, and fail where it wrote normal-range values.
  const auto judge_rows = [&](const ToleranceRow& row, const Emulated& e) -> Outcome {
    if (req.flush_below > 0) {
      const auto m = metrics::compare(e.K, e.ref.out);
      if (m.norm_ref == 0 && m.nan_ref == 0 && m.inf_ref == 0) {
        json fig;
        metrics::to_json(fig["out"], m);
        if (m.norm_test == 0 && m.nan_test == 0 && m.inf_test == 0)
          return {Verdict::passed, "every FP64 output of these rows is below the flush threshold: flushed as declared",
                  fig};
        return {Verdict::failed,
                fmt::format("every FP64 output of these rows is below the flush threshold {:.4g}, yet the kernel wrote "
                            "values of magnitude up to {:.4g} there",
                            req.flush_below, m.max_abs),
                fig};
      }
    }
    return judge_accuracy(row, e.K, Tensor{}, e.ref, e.emu, e.rev);
  };
  Emulated planned = emulate_slices(plan.slices);
  const std::vector<Part>& parts = planned.parts;
  const ref::AttentionOutput& ref = planned.ref;
  const ref::EmulatorOutput &emu = planned.emu, &rev = planned.rev;
  const Tensor& K = planned.K;
  // Per planned block (its rows of the concatenations, views): the emulator's and the floor
  // twin's figures, the block rule's budget.
  double b_rel = 0, b_max = 0, f_rel = 0, f_max = 0;
  for (i64 at = 0; const auto& part : parts) {
    const i64 n = part.ps.seqlen_q;
    const auto rows = [&](const Tensor& t) { return sub(ref_of(t), {0, at, 0, 0}, {1, n, 1, t.dim(3)}); };
    const ErrSums be = sums_of(rows(emu.out), rows(ref.out)), bf = sums_of(rows(rev.out_unrounded), rows(emu.out_unrounded));
    b_rel = std::max(b_rel, rel_l2(be));
    b_max = std::max(b_max, max_rel(be));
    f_rel = std::max(f_rel, rel_l2(bf));
    f_max = std::max(f_max, max_rel(bf));
    at += n;
  }

  // Every row: the FP64 reference of the whole problem, reduced per block.
  const bool want_acc = std::find(req.checks.begin(), req.checks.end(), "accuracy") != req.checks.end();
  std::vector<ErrSums> blocks;
  json complete_info;
  double t_complete = 0;
  if (want_acc) {
    const auto t0 = std::chrono::steady_clock::now();
    blocks = complete_errors(p, q, k, v, out, sa.rows, req.scratch_bytes, req.flush_below, zero_bound, complete_info);
    t_complete = since(t0);
  }
  // The whole output: NaN/Inf anywhere (what bitwise, judged on the planned blocks, cannot see).
  auto t0 = std::chrono::steady_clock::now();
  const Cmp scan = compare_refs(out, nullptr);
  const double t_scan = since(t0);
  const auto mref = metrics::compare(ref.out, ref.out);
  // The reference's own NaN/Inf: every row's when the complete pass ran, else the planned rows'.
  bool ref_finite = mref.nan_ref == 0 && mref.inf_ref == 0;
  for (const auto& b : blocks) ref_finite = ref_finite && b.nonfinite_ref == 0;
  sample["timing_s"] = {{"gather", t_gather},
                        {"prepare", t_prepare},
                        {"reference", t_ref},
                        {"emulator", t_emu},
                        {"complete_reference", t_complete},
                        {"scan", t_scan}};
  sample["emulator"] = on_device ? "gpu.emu (device)" : "ref::emulate (host)";
  if (!emulator_why.empty()) sample["emulator_host_why"] = emulator_why;
  if (on_device)
    sample["emulation"] = {
        {"quantization", "whole problem on the host (gpu.emu's host stage), uploaded once; the blocks' rows by "
                         "gpu.emu on the device (emulator and floor twin, rounded and not)"}};
  else if (prepared)
    sample["emulation"] = {
        {"quantization", "whole problem on the host (ref::prepare), blocks' rows by ref::emulate_rows"},
        {"prepared_bytes", prepared->bytes()},
        {"host_bytes_estimate", prepare_host_bytes(p, c.recipe)},
        {"max_host_bytes", sa.max_host_bytes}};
  else
    sample["emulation"] = {{"quantization", "element-wise casts: each block as a sub-problem of its own"}};
  sample["output_scan"] = {{"elements", scan.count}, {"nonfinite", scan.nonfinite_a},
                           {"first_nonfinite", scan.first >= 0 ? json(index_of(out, scan.first)) : json(nullptr)}};
  sample["reference"] = q.device ? "gpu.ref64 (device buffers)" : "ref::attention fp64 (host)";
  const i64 rows_total = p.batch * p.heads_q * p.seqlen_q;
  sample["coverage"] = {{"rows_compared_fp64", want_acc ? rows_total : 0},
                        {"rows_total", rows_total},
                        {"fraction", want_acc ? 1.0 : 0.0},
                        {"rows_emulated", sample["rows_sampled"]},
                        {"bitwise", plan.complete ? "complete" : "sampled (the emulated blocks)"}};
  if (want_acc) sample["complete_reference"] = complete_info;  // "complete" is the plan's (every block emulated)
  sample["flush_below"] = req.flush_below;

  Report rep;
  const double secs = since(t_all);
  for (const auto& ch : req.checks) {
    Outcome o;
    if (ch == "accuracy") {
      const ToleranceRow& row = tol.lookup(recipe_label(c.recipe), "accuracy");
      // The gate's rule on the emulated rows (exact: kernel, emulator, twin on the same rows).
      o = judge_rows(row, planned);
      // The block rule on every block.
      const auto bound = [&](const char* m, double budget, double floor) -> std::optional<double> {
        const auto it = row.bounds.find(m);
        if (it == row.bounds.end()) return std::nullopt;
        const auto e = row.bounds.find("rel_l2");
        return it->second.alpha * budget + it->second.beta * floor + (e != row.bounds.end() ? e->second.eps : 0.0);
      };
      const auto br = bound("rel_l2", b_rel, f_rel), bm = bound("max_abs", b_max, f_max);
      const i64 nblk = (p.seqlen_q + sa.rows - 1) / sa.rows;
      i64 failed_blocks = 0, nonfinite_blocks = 0, worst = -1, first_nan = -1;
      double worst_ratio = -1, worst_max_rel_ratio = -1;
      i64 worst_max_rel = -1;
      ErrSums whole;
      for (i64 id = 0; id < static_cast<i64>(blocks.size()); ++id) {
        const ErrSums& s = blocks[static_cast<std::size_t>(id)];
        whole.merge(s);
        if (s.nonfinite_test > 0) {
          ++nonfinite_blocks;
          if (first_nan < 0) first_nan = id;
        }
        // rel_l2 (mean square over the block's 64 x Dv elements) decides; max_rel is reported
        // against its sampled bound but does not decide: the worst of ~50k blocks' maxima
        // against the largest of a few emulated blocks' is an extreme-value comparison: on
        // honest kernels it set the worst ratio (0.59 vs rel_l2's 0.35 on the Wan call), and the
        // larger of the two reached 0.94 (docs/results/complete-gpu).
        double ratio = br ? rel_l2(s) / std::max(*br, 1e-300) : 0.0;
        if (std::isnan(ratio)) ratio = std::numeric_limits<double>::infinity();
        if (bm && max_rel(s) / std::max(*bm, 1e-300) > worst_max_rel_ratio)
          worst_max_rel_ratio = max_rel(s) / std::max(*bm, 1e-300), worst_max_rel = id;
        if (s.nonfinite_test > 0) continue;  // judged by the NaN/Inf rule below, not by its bound
        if (ratio > 1) ++failed_blocks;
        if (ratio > worst_ratio) worst_ratio = ratio, worst = id;
      }
      const auto where = [&](i64 id) {
        const i64 blk = id % nblk, h = (id / nblk) % p.heads_q, b = id / (nblk * p.heads_q);
        return std::tuple{b, h, blk * sa.rows, std::min(p.seqlen_q, blk * sa.rows + sa.rows)};
      };
      json bj{{"count", blocks.size()},
              {"rows_per_block", sa.rows},
              {"failed", failed_blocks},
              {"nonfinite_blocks", nonfinite_blocks},
              {"rule",
               {{"budget_rel_l2", b_rel}, {"floor_rel_l2", f_rel}, {"bound_rel_l2", br ? json(*br) : json(nullptr)},
                {"budget_max_rel", b_max}, {"floor_max_rel", f_max}, {"bound_max_rel", bm ? json(*bm) : json(nullptr)},
                {"emulated_blocks", plan.slices.size()}}},
              {"whole", sums_json(whole, req.flush_below > 0)}};
      if (first_nan >= 0) {
        const auto [b, h, r0, r1] = where(first_nan);
        bj["first_nonfinite_block"] = {{"batch", b}, {"head", h}, {"rows", {r0, r1}}};
      }
      if (worst >= 0) {
        const auto [b, h, r0, r1] = where(worst);
        bj["worst"] = sums_json(blocks[static_cast<std::size_t>(worst)], req.flush_below > 0);
        bj["worst"]["at"] = {{"batch", b}, {"head", h}, {"rows", {r0, r1}}};
        bj["worst"]["ratio_to_bound"] = json_number(worst_ratio);
      }
      if (worst_max_rel >= 0) {
        const auto [b, h, r0, r1] = where(worst_max_rel);
        bj["worst_max_rel"] = sums_json(blocks[static_cast<std::size_t>(worst_max_rel)], req.flush_below > 0);
        bj["worst_max_rel"]["at"] = {{"batch", b}, {"head", h}, {"rows", {r0, r1}}};
        bj["worst_max_rel"]["ratio_to_sampled_bound"] = json_number(worst_max_rel_ratio);
      }
      // A complete plan is judged by the gate's rule on every row (above); the block rule
      // carries the sampled budget to the rows the emulator did not see.
      if (want_acc && !blocks.empty() && conformance::verdict_ok(o.verdict) && failed_blocks > 0 && !plan.complete) {
        // NaN/Inf are the whole-output scan's (below: count and first element).
        // A block outside the sampled bound is not yet a failure: the budget came from other
        // blocks, and some inputs (outlier and sink fills) make one block's emulator error far
        // larger than another's. The blocks outside it are emulated themselves, worst first,
        // and each judged by the gate's rule on its own rows.
        constexpr std::size_t kConfirmMax = 16;  // blocks emulated to confirm, worst first
        std::vector<std::pair<double, i64>> over;
        for (i64 id = 0; id < static_cast<i64>(blocks.size()); ++id) {
          const ErrSums& s = blocks[static_cast<std::size_t>(id)];
          if (s.nonfinite_test == 0 && rel_l2(s) > *br) over.emplace_back(rel_l2(s) / std::max(*br, 1e-300), id);
        }
        std::sort(over.begin(), over.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
        if (over.size() > kConfirmMax) over.resize(kConfirmMax);
        json confirmed = json::array();
        double extended = *br;
        std::set<i64> seen;
        std::optional<Outcome> bad;
        for (const auto& [ratio, id] : over) {
          const auto [b, h, r0, r1] = where(id);
          const Emulated e = emulate_slices({block_slice(p, sa.rows, b, h, r0 / sa.rows)});
          const Outcome oi = judge_rows(row, e);
          const ErrSums be = sums_of(ref_of(e.emu.out), ref_of(e.ref.out)),
                        bf = sums_of(ref_of(e.rev.out_unrounded), ref_of(e.emu.out_unrounded));
          const double own = bound("rel_l2", rel_l2(be), rel_l2(bf)).value_or(*br);
          extended = std::max(extended, own);
          seen.insert(id);
          confirmed.push_back({{"at", {{"batch", b}, {"head", h}, {"rows", {r0, r1}}}},
                               {"rel_l2", rel_l2(blocks[static_cast<std::size_t>(id)])},
                               {"own_budget_rel_l2", rel_l2(be)},
                               {"own_bound_rel_l2", own},
                               {"verdict", std::string(verdict_name(oi.verdict))}});
          if (!conformance::verdict_ok(oi.verdict)) {
            bad = Outcome{Verdict::failed,
                          fmt::format("{} of {} blocks of {} rows outside the block rule (bound {:.4g} from {} emulated "
                                      "blocks); confirmed by the block's own emulation: batch {} head {} rows {}-{}: {}",
                                      failed_blocks, blocks.size(), sa.rows, *br, plan.slices.size(), b, h, r0, r1 - 1,
                                      oi.reason),
                          {}};
            break;
          }
        }
        i64 beyond = 0, first_beyond = -1;
        if (!bad)
          for (i64 id = 0; id < static_cast<i64>(blocks.size()); ++id) {
            const ErrSums& s = blocks[static_cast<std::size_t>(id)];
            if (s.nonfinite_test == 0 && !seen.count(id) && rel_l2(s) > extended && beyond++ == 0) first_beyond = id;
          }
        bj["confirmation"] = {
            {"rule", fmt::format("blocks outside the sampled bound are emulated themselves (worst first, at "
                                 "most {}) and judged by the gate's rule on their own rows; the rest must "
                                 "stay within the largest bound seen",
                                 kConfirmMax)},
            {"emulated", confirmed.size()},
            {"blocks", confirmed},
            {"extended_bound_rel_l2", extended},
            {"beyond_extended_bound", beyond}};
        if (!bad && beyond > 0) {
          const auto [b, h, r0, r1] = where(first_beyond);
          bad = Outcome{
              Verdict::failed,
              fmt::format("{} of {} blocks of {} rows outside the block rule; the {} worst, emulated to confirm, "
                          "pass on their own budgets, but {} more exceed the largest of those bounds ({:.4g}); "
                          "first: batch {} head {} rows {}-{}: rel_l2 {:.4g}",
                          failed_blocks, blocks.size(), sa.rows, confirmed.size(), beyond, extended, b, h, r0, r1 - 1,
                          rel_l2(blocks[static_cast<std::size_t>(first_beyond)])),
              {}};
        }
        if (bad) {
          bad->figures = std::move(o.figures);
          o = std::move(*bad);
        }
      }
      // Declared ftz: a kernel that flushes subnormals flushes them everywhere (inputs, products,
      // partial sums), not only in its outputs, so a zero output may stand for a normal-range
      // FP64 value: each of the row's T keys loses less than flush_below to a flushed V element or
      // product, and the normalised sum (row sum l >= 1) at most T * flush_below in all. A zero
      // whose FP64 value is at least 2 (T + 1) flush_below is beyond any flush: failed. (On the
      // case file's outlier fill, torch SDPA's flushing zeroed 14 outputs of 2^-125..2^-124.)
      if (req.flush_below > 0 && whole.zero_ref_max >= zero_bound && conformance::verdict_ok(o.verdict)) {
        i64 first = -1, nb = 0;
        for (i64 id = 0; id < static_cast<i64>(blocks.size()); ++id)
          if (blocks[static_cast<std::size_t>(id)].zero_ref_max >= zero_bound && nb++ == 0) first = id;
        const auto [b, h, r0, r1] = where(first);
        o = {Verdict::failed,
             fmt::format("ftz declared, yet outputs came back 0 whose FP64 reference is beyond what flushing can "
                         "remove, 2 (T + 1) 2^-126 = {:.4g}: largest {:.4g}, in {} blocks (first: batch {} head {} "
                         "rows {}-{})",
                         zero_bound, whole.zero_ref_max, nb, b, h, r0, r1 - 1),
             std::move(o.figures)};
      }
      if (req.flush_below > 0) bj["ftz_zero_rule"] = {{"bound", zero_bound}, {"largest_fp64_of_a_zero_output", whole.zero_ref_max}};
      o.figures["blocks"] = bj;
    } else {
      o = judge_bitwise(c.recipe, K, emu, plan);
    }
    // The whole output, not only the emulated rows: a NaN/Inf anywhere the reference cannot explain.
    if (conformance::verdict_ok(o.verdict) && o.verdict != Verdict::unsupported && scan.nonfinite_a > 0 && ref_finite)
      o = {Verdict::mistrusted,
           fmt::format("kernel output has {} NaN/Inf elements (first at {}) while the FP64 reference is finite",
                       scan.nonfinite_a, index_of(out, scan.first)),
           std::move(o.figures)};
    // Where the reference has NaN/Inf of its own somewhere, per block: a non-finite output
    // element where the reference is finite (ErrSums counts exactly those) is still unexplained.
    if (conformance::verdict_ok(o.verdict) && o.verdict != Verdict::unsupported && !ref_finite)
      for (std::size_t id = 0; id < blocks.size(); ++id)
        if (blocks[id].nonfinite_test > 0) {
          const i64 nb = (p.seqlen_q + sa.rows - 1) / sa.rows, bi = static_cast<i64>(id);
          o = {Verdict::mistrusted,
               fmt::format("kernel output has NaN/Inf where the FP64 reference is finite (batch {} head {} rows from {})",
                           bi / (nb * p.heads_q), (bi / nb) % p.heads_q, (bi % nb) * sa.rows),
               std::move(o.figures)};
          break;
        }
    o.figures["sample"] = sample;
    if (!conformance::verdict_ok(o.verdict)) rep.exit_code = 1;
    rep.results.push_back(make_result(c, ch, std::move(o), secs));
  }
  rep.sample = std::move(sample);
  return rep;
}

struct CallLog::Impl {
  struct Entry {
    std::string check, what, unsupported;
    TensorRef a;
    int slot = -1;
    Cmp host;
  };
  struct Prints {
    std::string what;
    std::vector<std::pair<std::string, int>> slots;
    std::vector<std::uint64_t> host;
  };
  bool device = false;
#ifdef ATTEST_GPU_BACKEND
  std::unique_ptr<gpu::Deferred> dev;
#endif
  std::vector<Entry> entries;
  std::vector<Prints> prints;
  bool finished = false;
};

CallLog::CallLog(bool device, void* stream, int slots) {
  auto impl = std::make_unique<Impl>();  // nothing leaks if the device side throws
  impl->device = device;
  if (device) {
#ifdef ATTEST_GPU_BACKEND
    impl->dev = std::make_unique<gpu::Deferred>(slots, stream);
#else
    (void)stream, (void)slots;
    no_gpu("call log");
#endif
  }
  impl_ = impl.release();
}

CallLog::~CallLog() { delete impl_; }

void CallLog::compare(const std::string& check, const std::string& what, const TensorRef& a, const TensorRef& b) {
  if (check != "determinism" && check != "call_path")
    throw Error(fmt::format("call log: check '{}' is not determinism or call_path", check));
  if (a.device != impl_->device || b.device != impl_->device)
    throw Error("call log: tensor on the wrong side (device vs host) for this log");
  for (int i = 0; i < 4; ++i)
    if (a.shape[i] != b.shape[i])
      throw Error(fmt::format("{}: output shape differs from the first call's in dimension {} ({} vs {})", what, i, b.shape[i],
                              a.shape[i]));
  Impl::Entry e{check, what, {}, a, -1, {}};
  const auto ea = extent(a), eb = extent(b);
  if (ea.first < eb.second && eb.first < ea.second) {
    e.unsupported = what + ": the output shares memory with the first call's (the callable reuses one output buffer): "
                           "the two results cannot be compared; return a fresh tensor per call";
  } else if (impl_->device) {
#ifdef ATTEST_GPU_BACKEND
    e.slot = impl_->dev->compare(b, a);
#endif
  } else {
    e.host = compare_refs(b, &a);
  }
  impl_->entries.push_back(std::move(e));
}

void CallLog::fingerprint(const std::string& what, const std::vector<std::pair<std::string, TensorRef>>& inputs) {
  Impl::Prints p{what, {}, {}};
  for (const auto& [name, t] : inputs) {
    if (t.device != impl_->device) throw Error("call log: tensor on the wrong side (device vs host) for this log");
    if (impl_->device) {
#ifdef ATTEST_GPU_BACKEND
      p.slots.emplace_back(name, impl_->dev->checksum(t));
#endif
    } else {
      p.slots.emplace_back(name, -1);
      p.host.push_back(checksum(t));
    }
  }
  if (!impl_->prints.empty() && impl_->prints.front().slots.size() != p.slots.size())
    throw Error("call log: fingerprints of a different set of inputs than the first");
  impl_->prints.push_back(std::move(p));
}

std::vector<Result> CallLog::finish(const Case& c) {
  if (impl_->finished) throw Error("call log: finished twice");
  impl_->finished = true;
#ifdef ATTEST_GPU_BACKEND
  if (impl_->device) impl_->dev->collect();
#endif
  const auto fig = [&](const Impl::Entry& e) {
    if (e.slot < 0) return e.host;
#ifdef ATTEST_GPU_BACKEND
    const auto f = impl_->dev->figures(e.slot);
    return Cmp{f.count, f.bit_diff, f.nonfinite_a, f.first, f.max_abs};
#else
    return e.host;
#endif
  };
  std::vector<Result> rows;
  std::vector<std::string> order;
  for (const auto& e : impl_->entries)
    if (std::find(order.begin(), order.end(), e.check) == order.end()) order.push_back(e.check);
  for (const auto& check : order) {
    std::vector<std::string> seen;
    const Impl::Entry* unsupported = nullptr;
    std::optional<Outcome> bad;
    for (const auto& e : impl_->entries) {
      if (e.check != check) continue;
      seen.push_back(e.what);
      if (!e.unsupported.empty()) {
        if (unsupported == nullptr) unsupported = &e;
        continue;
      }
      const Cmp m = fig(e);
      if (m.bit_diff == 0 || bad) continue;
      json f{{"elements", m.count}, {"differ", m.bit_diff}, {"max_abs", m.max_abs}, {"what", e.what}};
      bad = Outcome{Verdict::failed,
                    fmt::format("{}: {} of {} output elements differ bitwise from the first call; first at {}, max |diff| {:.3g}",
                                e.what, m.bit_diff, m.count, index_of(e.a, m.first), m.max_abs),
                    f};
    }
    Outcome o;
    if (bad) o = std::move(*bad);
    else if (unsupported != nullptr) o = {Verdict::unsupported, unsupported->unsupported, json::object()};
    else o = {Verdict::passed, "", json{{"calls", seen}}};
    rows.push_back(make_result(c, check, std::move(o), 0));
  }
  if (impl_->prints.size() > 1) {
    const auto value = [&](const Impl::Prints& p, std::size_t i) -> std::uint64_t {
      if (p.slots[i].second < 0) return p.host[i];
#ifdef ATTEST_GPU_BACKEND
      return impl_->dev->sum(p.slots[i].second);
#else
      return 0;
#endif
    };
    const auto& before = impl_->prints.front();
    std::optional<Result> row;
    for (std::size_t k = 1; k < impl_->prints.size() && !row; ++k) {
      const auto& p = impl_->prints[k];
      std::vector<Fingerprint> fp;
      bool changed = false;
      for (std::size_t i = 0; i < p.slots.size(); ++i) {
        fp.push_back({p.slots[i].first, value(before, i), value(p, i)});
        changed = changed || fp.back().before != fp.back().after;
      }
      if (changed || k + 1 == impl_->prints.size())
        row = input_guard(c, changed ? p.what : fmt::format("{} calls", impl_->prints.size() - 1), fp);
    }
    rows.push_back(std::move(*row));
  }
  return rows;
}

std::uint64_t checksum(const TensorRef& t) {
  if (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16 && t.dtype != DType::f64)
    throw Error(fmt::format("checksum: element type {} is not f64, f32, bf16 or f16", dtype_name(t.dtype)));
  if (t.device) {
#ifdef ATTEST_GPU_BACKEND
    return gpu::checksum_device(t);
#else
    no_gpu("checksum");
#endif
  }
  std::uint64_t s = 0;
  i64 e = 0;
  for (i64 i0 = 0; i0 < t.shape[0]; ++i0)
    for (i64 i1 = 0; i1 < t.shape[1]; ++i1)
      for (i64 i2 = 0; i2 < t.shape[2]; ++i2)
        for (i64 i3 = 0; i3 < t.shape[3]; ++i3, ++e)
          s += elem::checksum_term(elem::bits(t, t.offset(i0, i1, i2, i3)), static_cast<std::uint64_t>(e));
  return s;
}


void generate(const Problem& p, datasets::Distribution dist, std::uint64_t seed, const TensorRef& q, const TensorRef& k,
              const TensorRef& v) {
  if (p.ragged()) throw Error("generate: ragged problems are not supported");
  // generate_qkv's layout: contiguous float32 bshd.
  for (const auto& [x, name, h, s, d] : {std::tuple{&q, "q", p.heads_q, p.seqlen_q, p.head_dim},
                                         std::tuple{&k, "k", p.heads_kv, p.seqlen_kv, p.head_dim},
                                         std::tuple{&v, "v", p.heads_kv, p.seqlen_kv, p.head_dim_v}}) {
    expect_shape(*x, name, {p.batch, s, h, d});
    if (x->dtype != DType::f32 || x->stride[3] != 1 || x->stride[2] != d || x->stride[1] != h * d || x->stride[0] != s * h * d)
      throw Error(fmt::format("generate: tensor '{}' must be contiguous float32 [B,S,H,D]", name));
    if (x->device != q.device) throw Error("generate: q, k and v must all be device or all host tensors");
  }
  if (!q.device) {  // host refs: the CPU generator (the same bits; CI runs this side)
    const auto in = datasets::generate_qkv(p, dist, seed);
    for (const auto& [x, t] : {std::pair{&q, &in.q}, std::pair{&k, &in.k}, std::pair{&v, &in.v}})
      std::memcpy(const_cast<void*>(x->data), t->contiguous().data<float>(), static_cast<std::size_t>(t->numel()) * sizeof(float));
    return;
  }
#ifdef ATTEST_GPU_BACKEND
  gpu::generate_qkv_device(p, dist, seed, static_cast<float*>(const_cast<void*>(q.data)),
                           static_cast<float*>(const_cast<void*>(k.data)), static_cast<float*>(const_cast<void*>(v.data)));
  gpu::synchronize();
#else
  no_gpu("generate");
#endif
}

json info() {
#ifdef ATTEST_GPU_BACKEND
  json j{{"backend", gpu::backend_name()}, {"devices", gpu::device_count()}};
  if (gpu::device_count() > 0) {
    const auto d = gpu::device_info(0);
    j["device"] = d.name;
    j["arch"] = d.arch;
  }
  return j;
#else
  return json{{"backend", "none"}, {"devices", 0}};
#endif
}

bool has_device_backend() {
#ifdef ATTEST_GPU_BACKEND
  return true;
#else
  return false;
#endif
}

std::optional<Outcome> judge_on_device(const Case& c, const std::string& check, const Tensor& q, const Tensor& k,
                                       const Tensor& v, const Tensor& out, const ToleranceTable& tol,
                                       const SampleArgs& sample, std::string& why, double flush_below) {
  why = refusal(c, sample);
  if (!why.empty()) return std::nullopt;
#ifdef ATTEST_GPU_BACKEND
  // One contiguous copy of each on the device; the refs keep the logical [B,S,H,D] order.
  std::vector<gpu::DeviceBuffer> bufs;
  bufs.reserve(4);
  const auto upload = [&](const Tensor& t) {
    const Tensor h = t.contiguous();
    const auto bytes = static_cast<std::size_t>(h.numel()) * dtype_size(h.dtype());
    bufs.emplace_back(std::max<std::size_t>(bytes, 1));
    if (bytes > 0) bufs.back().upload(h.raw(), bytes);
    TensorRef r = ref_of(h);
    r.data = bufs.back().data();
    r.device = true;
    return r;
  };
  // The gate runs OpenMP single-threaded (gate.cpp); the block references and emulations of the
  // judgement get the team the caller asks for.
  const int omp_before = omp_get_max_threads();
  struct Restore {
    int n;
    ~Restore() { omp_set_num_threads(n); }
  } restore{omp_before};
  if (sample.threads > 0) omp_set_num_threads(sample.threads);
  JudgeRequest jr;
  jr.c = c;
  jr.checks = {check};
  jr.sample = sample;
  jr.tolerances = &tol;
  jr.q = upload(q);
  jr.k = upload(k);
  jr.v = upload(v);
  jr.out = upload(out);
  jr.flush_below = flush_below;
  auto rep = judge(jr);
  if (rep.results.size() != 1) throw Error("judge_on_device: the engine returned no row");
  Outcome o = std::move(rep.results.front().outcome);
  o.figures["oracles"] = "device";
  return o;
#else
  (void)check, (void)q, (void)k, (void)v, (void)out, (void)tol, (void)flush_below;
  no_gpu("judge_on_device");
#endif
}

}  // namespace attest::conformance::engine

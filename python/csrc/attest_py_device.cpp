// The device-resident path (docs/python.md "Device-resident cases"): the Python side allocates
// q, k, v where the kernel runs, attest fills them with the case's Philox streams
// (device_generate: the same bits as the CPU generator, so a case id means the same tensors on
// both), the kernel is called on them, and its output is judged where it lives:
//
//   device_judge  accuracy (and bitwise) on a seeded sample of (batch, head, query-row block)
//                 slices: the FP64 reference (gpu.ref64 on the device buffers) and the recipe
//                 emulator with its floor twin on those rows only, judged by the gate's own
//                 judge_accuracy; plus a scan of the whole output for NaN/Inf on the device.
//   device_same   determinism / call_path: two outputs compared bit for bit on the device.
//   device_plan   the sample a problem gets (pure host code: also answered by a CPU build).
//
// Only figures and the sampled rows cross to the host. Tensors arrive as views {ptr, dtype,
// shape, strides, device}: a framework's memory, read in place (torch data_ptr/stride, no copy).
// Host views (device=false) take the same path with the reference on the CPU, so CI checks the
// sampling and the judgement without a GPU.
#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attest/conformance/accuracy.hpp"
#include "attest/conformance/case.hpp"
#include "attest/conformance/check.hpp"
#include "attest/core/status.hpp"
#include "attest/datasets/distributions.hpp"
#include "attest/metrics/tensor_metrics.hpp"
#include "attest/reference/attention.hpp"
#include "attest/reference/emulate.hpp"
#include "attest_py_internal.hpp"

#if ATTEST_PY_GPU
#include "attest/kernels/gpu/attn_fwd_ref64.hpp"
#include "attest/kernels/gpu/compare.hpp"
#include "attest/kernels/gpu/device.hpp"
#include "attest/kernels/gpu/generate_qkv.hpp"
#endif

namespace attest::py {
namespace {

using nlohmann::json;
using conformance::Outcome;
using conformance::Verdict;
using i64 = std::int64_t;

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- views ----

enum class Elem { f32, bf16, f16 };

struct View {
  std::uintptr_t ptr = 0;
  Elem type = Elem::f32;
  i64 shape[4] = {1, 1, 1, 1};
  i64 stride[4] = {0, 0, 0, 0};
  bool device = false;
};

View view_from(const json& req, const char* name) {
  if (!req.contains(name) || req.at(name).is_null()) throw Error(fmt::format("tensor '{}' is missing", name));
  const json& j = req.at(name);
  View v;
  v.ptr = j.at("ptr").get<std::uintptr_t>();
  if (v.ptr == 0) throw Error(fmt::format("tensor '{}': NULL data pointer", name));
  const auto dt = j.at("dtype").get<std::string>();
  if (dt == "f32" || dt == "float32") v.type = Elem::f32;
  else if (dt == "bf16" || dt == "bfloat16") v.type = Elem::bf16;
  else if (dt == "f16" || dt == "float16") v.type = Elem::f16;
  else throw Error(fmt::format("tensor '{}': dtype '{}' is not float32, bfloat16 or float16", name, dt));
  const auto shape = j.at("shape").get<std::vector<i64>>(), strides = j.at("strides").get<std::vector<i64>>();
  if (shape.size() != 4 || strides.size() != 4)
    throw Error(fmt::format("tensor '{}': rank {} (strides {}), expected 4", name, shape.size(), strides.size()));
  for (int i = 0; i < 4; ++i) {
    if (shape[i] < 0) throw Error(fmt::format("tensor '{}': negative extent {} in dimension {}", name, shape[i], i));
    v.shape[i] = shape[i];
    v.stride[i] = strides[i];
  }
  v.device = j.value("device", false);
  return v;
}

void expect_shape(const View& v, const char* name, std::initializer_list<i64> want) {
  int i = 0;
  for (const i64 w : want) {
    if (v.shape[i] != w)
      throw Error(fmt::format("tensor '{}': shape [{}, {}, {}, {}] does not match the problem (dimension {} should be {})", name,
                              v.shape[0], v.shape[1], v.shape[2], v.shape[3], i, w));
    ++i;
  }
}

float host_load(const View& v, i64 off) {
  if (v.type == Elem::f32) return reinterpret_cast<const float*>(v.ptr)[off];
  const std::uint16_t h = reinterpret_cast<const std::uint16_t*>(v.ptr)[off];
  if (v.type == Elem::bf16) return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
  const std::uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (m << 13));
  if (e != 0) return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
  const float x = std::ldexp(static_cast<float>(m), -24);
  return sign != 0 ? -x : x;
}

i64 offset(const View& v, i64 a, i64 b, i64 c, i64 d) {
  return a * v.stride[0] + b * v.stride[1] + c * v.stride[2] + d * v.stride[3];
}

#if ATTEST_PY_GPU
gpu::View4 to_view4(const View& v) {
  gpu::View4 g;
  g.data = reinterpret_cast<const void*>(v.ptr);
  g.type = v.type == Elem::f32 ? gpu::CmpType::f32 : v.type == Elem::bf16 ? gpu::CmpType::bf16 : gpu::CmpType::f16;
  for (int i = 0; i < 4; ++i) {
    g.shape[i] = v.shape[i];
    g.stride[i] = v.stride[i];
  }
  return g;
}
#endif

[[noreturn, maybe_unused]] void no_gpu(const char* what) {
  throw Error(fmt::format("{}: device tensors need a libattest_py built with a GPU backend; this one was built with "
                          "ATTEST_GPU=none (scripts/device/build-python-cuda builds the CUDA one)",
                          what));
}

// The logical block [lo, hi) of v as a contiguous f32 Tensor of that shape.
Tensor gather(const View& v, std::array<i64, 4> lo, std::array<i64, 4> hi) {
  Tensor t(DType::f32, {hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2], hi[3] - lo[3]});
  if (v.device) {
#if ATTEST_PY_GPU
    gpu::gather_f32(to_view4(v), lo.data(), hi.data(), t.data<float>());
#else
    no_gpu("gather");
#endif
    return t;
  }
  float* o = t.data<float>();
  for (i64 a = lo[0]; a < hi[0]; ++a)
    for (i64 b = lo[1]; b < hi[1]; ++b)
      for (i64 c = lo[2]; c < hi[2]; ++c)
        for (i64 d = lo[3]; d < hi[3]; ++d) *o++ = host_load(v, offset(v, a, b, c, d));
  return t;
}

struct Cmp {
  i64 count = 0, bit_diff = 0, nonfinite_a = 0, first = -1;
  double max_abs = 0;
};

// a against b bit for bit (b == nullptr: a scanned for NaN/Inf). Same figures on both sides.
Cmp compare_views(const View& a, const View* b) {
  if (b != nullptr) {
    if (b->device != a.device) throw Error("compare: one tensor is on the device and the other on the host");
    for (int i = 0; i < 4; ++i)
      if (a.shape[i] != b->shape[i])
        throw Error(fmt::format("compare: shapes differ in dimension {} ({} vs {})", i, a.shape[i], b->shape[i]));
  }
  Cmp c;
  if (a.device) {
#if ATTEST_PY_GPU
    const gpu::View4 gb = b != nullptr ? to_view4(*b) : gpu::View4{};
    const auto f = gpu::compare_device(to_view4(a), gb);
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
          const float x = host_load(a, offset(a, i0, i1, i2, i3));
          if (!std::isfinite(x)) {
            ++c.nonfinite_a;
            if (b == nullptr && c.first < 0) c.first = e;
          }
          if (b == nullptr) continue;
          const float y = host_load(*b, offset(*b, i0, i1, i2, i3));
          if (std::bit_cast<std::uint32_t>(x) != std::bit_cast<std::uint32_t>(y)) {
            ++c.bit_diff;
            if (c.first < 0) c.first = e;
            const double d = std::fabs(static_cast<double>(x) - y);
            if (std::isfinite(d)) c.max_abs = std::max(c.max_abs, d);
          }
        }
  c.count = e;
  return c;
}

// Logical index e of a view's shape as (i0, i1, i2, i3).
std::array<i64, 4> unravel(const View& v, i64 e) {
  return {e / (v.shape[3] * v.shape[2] * v.shape[1]), (e / (v.shape[3] * v.shape[2])) % v.shape[1],
          (e / v.shape[3]) % v.shape[2], e % v.shape[3]};
}

std::string index_of(const View& v, i64 e) {
  const auto i = unravel(v, e);
  return fmt::format("[{},{},{},{}]", i[0], i[1], i[2], i[3]);
}

// Byte range [lo, hi) a view's elements span.
std::pair<std::uintptr_t, std::uintptr_t> extent(const View& v) {
  const std::uintptr_t size = v.type == Elem::f32 ? 4 : 2;
  std::int64_t lo = 0, hi = 0;
  for (int i = 0; i < 4; ++i) {
    if (v.shape[i] == 0) return {v.ptr, v.ptr};
    (v.stride[i] < 0 ? lo : hi) += (v.shape[i] - 1) * v.stride[i];
  }
  return {v.ptr + static_cast<std::uintptr_t>(lo * static_cast<std::int64_t>(size)),
          v.ptr + static_cast<std::uintptr_t>(hi * static_cast<std::int64_t>(size)) + size};
}

// ---- the sample ----

struct Slice {
  i64 b = 0, h = 0, r0 = 0, r1 = 0, kend = 0;
  auto key() const { return std::tie(b, h, r0); }
};

struct Plan {
  std::vector<Slice> slices;
  bool complete = false;
  i64 rows = 0;  ///< query rows per block
  double macs_total = 0, macs_sampled = 0;
  i64 kv_tiles = 0, kv_tiles_covered = 0;
};

// `causal`: the kernel's causal convention (the callable gets one boolean, as torch's is_causal):
// "top_left" or "bottom_right"; the two masks coincide when seqlen_q == seqlen_kv.
std::string plan_refusal(const Problem& p, const std::string& causal) {
  if (p.ragged()) return "ragged (varlen) problems are not sampled by the device path";
  if (p.mask != Mask::none && p.seqlen_q > p.seqlen_kv)
    return fmt::format("mask {} with seqlen_q {} > seqlen_kv {} clips the key range of some rows: the device path does "
                       "not sample such problems", mask_name(p.mask), p.seqlen_q, p.seqlen_kv);
  if (p.mask != Mask::none && p.seqlen_q != p.seqlen_kv &&
      (p.mask == Mask::causal_tl) != (causal == "top_left"))
    return fmt::format("mask {} with seqlen_q != seqlen_kv: the kernel's causal convention is {} (causal= declaration)",
                       mask_name(p.mask), causal);
  return {};
}

// The sample (docs/python.md "Device-resident cases"): blocks of `rows` query rows aligned to
// `rows`; every (batch, head, block) when the whole problem's emulated work fits `max_macs`,
// else the first block of (0, 0), the last block of (B-1, H-1) -- whose rows see every key, so
// every KV tile boundary and the partial last tile are covered, with or without a causal mask --
// and seeded random blocks while the work stays within `max_macs`. std::mt19937_64 is specified
// bit for bit by the standard and draws are reduced by `%`, so a seed names the same sample on
// every platform (std::uniform_int_distribution is implementation-defined).
Plan plan_sample(const Problem& p, i64 rows, double max_macs, std::uint64_t seed, i64 tile_kv, const std::string& causal) {
  if (const auto why = plan_refusal(p, causal); !why.empty()) throw Error(why);
  Plan plan;
  plan.rows = rows;
  const i64 S = p.seqlen_q, T = p.seqlen_kv, B = p.batch, H = p.heads_q;
  const i64 nb = (S + rows - 1) / rows;
  const auto make = [&](i64 b, i64 h, i64 blk) {
    Slice s{b, h, blk * rows, std::min(S, blk * rows + rows), 0};
    s.kend = std::clamp<i64>(p.visible_keys(b, s.r1 - 1), 0, T);
    return s;
  };
  const auto work = [&](const Slice& s) { return static_cast<double>(s.r1 - s.r0) * s.kend * (p.head_dim + p.head_dim_v); };
  double per_bh = 0;
  for (i64 blk = 0; blk < nb; ++blk) per_bh += work(make(0, 0, blk));
  plan.macs_total = per_bh * B * H;
  plan.kv_tiles = (T + tile_kv - 1) / tile_kv;
  if (plan.macs_total <= max_macs) {
    plan.complete = true;
    for (i64 b = 0; b < B; ++b)
      for (i64 h = 0; h < H; ++h)
        for (i64 blk = 0; blk < nb; ++blk) plan.slices.push_back(make(b, h, blk));
  } else {
    std::set<std::tuple<i64, i64, i64>> seen;
    const auto add = [&](const Slice& s) {
      if (!seen.insert(s.key()).second) return;
      plan.slices.push_back(s);
    };
    add(make(0, 0, 0));
    add(make(B - 1, H - 1, nb - 1));
    double used = 0;
    for (const auto& s : plan.slices) used += work(s);
    std::mt19937_64 rng(seed ^ 0x5A4D504C45ull);  // "ZMPLE": the sample's stream, apart from the data's Philox
    const i64 all = B * H * nb;
    for (i64 tries = 0; tries < 4 * all && static_cast<i64>(seen.size()) < all; ++tries) {
      const auto r = static_cast<i64>(rng() % static_cast<std::uint64_t>(all));
      const Slice s = make(r / (H * nb), (r / nb) % H, r % nb);
      if (seen.count(s.key()) != 0) continue;
      if (used + work(s) > max_macs) break;
      used += work(s);
      add(s);
    }
    std::sort(plan.slices.begin(), plan.slices.end(), [](const Slice& x, const Slice& y) { return x.key() < y.key(); });
  }
  i64 kmax = 0;
  for (const auto& s : plan.slices) {
    plan.macs_sampled += work(s);
    kmax = std::max(kmax, s.kend);
    // The slice becomes a cross-attention sub-problem over keys [0, kend); with a causal mask
    // (S == T) row i sees keys [0, i] = causal_br on that sub-problem. Check it, row by row.
    if (p.mask != Mask::none)
      for (i64 i = s.r0; i < s.r1; ++i)
        if (p.visible_keys(s.b, i) != s.kend - (s.r1 - 1 - i))
          throw Error(fmt::format("mask {} clips the key range of row {} (seqlen_q {} > seqlen_kv {}): the device path does "
                                  "not sample such problems", mask_name(p.mask), i, p.seqlen_q, p.seqlen_kv));
  }
  plan.kv_tiles_covered = (kmax + tile_kv - 1) / tile_kv;
  return plan;
}

json plan_json(const Plan& plan, const Problem& p, std::uint64_t seed, double max_macs) {
  json list = json::array();
  i64 rows = 0;
  for (const auto& s : plan.slices) {
    rows += s.r1 - s.r0;
    list.push_back({s.b, s.h, s.r0, s.r1});
  }
  return json{{"complete", plan.complete},
              {"slices", plan.slices.size()},
              {"rows_per_block", plan.rows},
              {"rows_sampled", rows},
              {"rows_total", p.batch * p.heads_q * p.seqlen_q},
              {"fraction", static_cast<double>(rows) / static_cast<double>(std::max<i64>(1, p.batch * p.heads_q * p.seqlen_q))},
              {"macs_sampled", plan.macs_sampled},
              {"macs_total", plan.macs_total},
              {"max_macs", max_macs},
              {"kv_tiles", plan.kv_tiles},
              {"kv_tiles_covered", plan.kv_tiles_covered},
              {"seed", seed},
              {"blocks", list},
              {"repro", fmt::format("sample_rows={} sample_macs={:.0f}", plan.rows, max_macs)}};
}

struct SampleArgs {
  i64 rows = 64;
  double max_macs = 8589934592.0;  // 2^33 multiply-adds: about ten seconds of the CPU emulator on 16 cores (docs)
  std::string causal = "top_left";
};

SampleArgs sample_args(const json& req) {
  SampleArgs a;
  if (req.contains("sample_rows") && !req.at("sample_rows").is_null()) a.rows = req.at("sample_rows").get<i64>();
  if (req.contains("sample_macs") && !req.at("sample_macs").is_null()) a.max_macs = req.at("sample_macs").get<double>();
  a.causal = req.value("causal", a.causal);
  if (a.causal != "top_left" && a.causal != "bottom_right")
    throw Error(fmt::format("causal '{}' is not top_left or bottom_right", a.causal));
  // Input errors (exit 2), unlike a problem the path does not sample (UNSUPPORTED).
  if (a.rows < 1) throw Error(fmt::format("sample_rows {} is not >= 1", a.rows));
  if (!(a.max_macs > 0)) throw Error(fmt::format("sample_macs {} is not > 0", a.max_macs));
  return a;
}

// Recipes whose input quantizers act element by element: a slice's emulation is then exactly
// the whole problem's restricted to the slice. Block, token or tensor scales (INT8, FP8, MX)
// depend on rows outside the slice.
std::string recipe_refusal(const Recipe& r) {
  for (const auto* s : {&r.q, &r.k, &r.v})
    if (*s != "bf16" && *s != "fp16" && *s != "f32")
      return fmt::format("recipe {}: input scheme '{}' is not an element-wise cast; the device path samples only cast "
                         "recipes (scales over blocks, tokens or tensors depend on rows outside a sample)",
                         recipe_label(r), *s);
  return {};
}

// FP64 reference of one slice: gpu.ref64 reading the caller's device buffers in place, or the
// CPU reference for host views.
Tensor slice_reference(const Problem& ps, const View& q, const View& k, const View& v, const Slice& s, i64 g,
                       const Tensor& qh, const Tensor& kh, const Tensor& vh) {
  if (!q.device) return ref::attention(ps, qh, kh, vh, ref::Precision::fp64).out;
#if ATTEST_PY_GPU
  if (q.type != Elem::f32 || k.type != Elem::f32 || v.type != Elem::f32)
    throw Error("device inputs q, k, v must be float32 (the generated tensors, before the kernel's cast)");
  gpu::Ref64Args a = gpu::ref64_args(ps);
  const auto dt = [](const View& x, i64 b, i64 s0, i64 h) {
    gpu::DeviceTensor t;
    t.data = reinterpret_cast<float*>(x.ptr) + offset(x, b, s0, h, 0);
    t.type = gpu::ElemType::f32;
    for (int i = 0; i < 4; ++i) t.stride[i] = x.stride[i];
    return t;
  };
  a.q = dt(q, s.b, s.r0, s.h);
  a.k = dt(k, s.b, 0, g);
  a.v = dt(v, s.b, 0, g);
  const i64 n = s.r1 - s.r0, dv = ps.head_dim_v;
  gpu::DeviceBuffer out(static_cast<std::size_t>(n * dv) * sizeof(double));
  a.out.data = out.data();
  a.out.type = gpu::ElemType::f64;
  a.out.stride[0] = n * dv;
  a.out.stride[1] = dv;
  a.out.stride[2] = dv;
  a.out.stride[3] = 1;
  gpu::attn_fwd_ref64(a);
  Tensor r(DType::f64, {1, n, 1, dv});
  out.download(r.data<double>(), static_cast<std::size_t>(n * dv) * sizeof(double));
  return r;
#else
  (void)k, (void)v, (void)s, (void)g, (void)kh, (void)vh;
  no_gpu("reference");
#endif
}

json op_plan(const json& req) {
  const Problem p = parse_problem(req.at("problem").get<std::string>());
  const Recipe r = parse_recipe(req.value("recipe", std::string("bf16")));
  const auto sa = sample_args(req);
  const auto seed = req.value("seed", std::uint64_t{1});
  json j{{"problem",
           {{"batch", p.batch}, {"heads_q", p.heads_q}, {"heads_kv", p.heads_kv}, {"seqlen_q", p.seqlen_q},
            {"seqlen_kv", p.seqlen_kv}, {"head_dim", p.head_dim}, {"head_dim_v", p.head_dim_v},
            {"mask", std::string(mask_name(p.mask))}, {"scale", p.scale()}, {"flops", p.flops()}}}};
  std::string why = recipe_refusal(r);
  if (why.empty()) {
    try {
      j["sample"] = plan_json(plan_sample(p, sa.rows, sa.max_macs, seed, r.tile_kv, sa.causal), p, seed, sa.max_macs);
    } catch (const Error& e) {
      why = e.what();
    }
  }
  if (!why.empty()) j["refusal"] = why;
  return j;
}

// accuracy (and bitwise) on the sample; see the file comment.
json op_judge(const json& req, int& rc) {
  const auto t_all = std::chrono::steady_clock::now();
  const conformance::Case c = case_from(req);
  const Problem& p = c.problem;
  const auto checks = req.value("checks", std::vector<std::string>{"accuracy"});
  // determinism and call_path are device_same's; named here only to be refused with the problem.
  bool judged_elsewhere = false;
  for (const auto& ch : checks) {
    if (ch == "determinism" || ch == "call_path") judged_elsewhere = true;
    else if (ch != "accuracy" && ch != "bitwise")
      throw Error(fmt::format("device_judge: check '{}' is not accuracy, bitwise, determinism or call_path", ch));
  }
  conformance::ToleranceTable holder;
  const auto& tol = tolerances(req, holder);
  const auto sa = sample_args(req);

  json results = json::array();
  rc = 0;
  const auto emit = [&](const std::string& check, Outcome o, double secs) {
    if (!conformance::verdict_ok(o.verdict)) rc = 1;
    results.push_back(conformance::to_json(make_result(c, check, std::move(o), secs)));
  };
  // A problem the path does not take: every requested check UNSUPPORTED with the reason.
  const auto refuse_all = [&](const std::string& why) {
    for (const auto& ch : checks) emit(ch, {Verdict::unsupported, why, json::object()}, 0);
    return json{{"results", results}, {"exit_code", rc}};
  };
  if (const auto why = recipe_refusal(c.recipe); !why.empty()) return refuse_all(why);
  Plan plan;
  try {
    plan = plan_sample(p, sa.rows, sa.max_macs, c.seed, c.recipe.tile_kv, sa.causal);
  } catch (const Error& e) {
    return refuse_all(e.what());
  }
  if (judged_elsewhere) throw Error("device_judge judges accuracy and bitwise; determinism and call_path are device_same's");
  // Views are read only for a problem the path takes (a refused one needs no tensors).
  const View q = view_from(req, "q"), k = view_from(req, "k"), v = view_from(req, "v"), out = view_from(req, "out");
  if (q.device != out.device || k.device != out.device || v.device != out.device)
    throw Error("device_judge: q, k, v and out must all be device tensors or all host tensors");
  expect_shape(q, "q", {p.batch, p.seqlen_q, p.heads_q, p.head_dim});
  expect_shape(k, "k", {p.batch, p.seqlen_kv, p.heads_kv, p.head_dim});
  expect_shape(v, "v", {p.batch, p.seqlen_kv, p.heads_kv, p.head_dim_v});
  expect_shape(out, "out", {p.batch, p.seqlen_q, p.heads_q, p.head_dim_v});
  json sample = plan_json(plan, p, c.seed, sa.max_macs);

  Recipe er = c.recipe;
  if (er.exp2 == Exp2Policy::hw) er.exp2 = Exp2Policy::cr;  // as the gate's Context (no bitwise model of hw exp2)
  double t_gather = 0, t_ref = 0;
  // Per slice: its rows of q, out and the reference, its keys (gathered from the caller's
  // buffers), and the sub-problem (one head, rows [r0, r1), keys [0, kend)).
  struct Part {
    Problem ps;
    Tensor qh, kh, vh;
  };
  std::vector<Part> parts;
  std::vector<Tensor> kt, rt;
  std::map<std::tuple<i64, i64, i64>, std::pair<Tensor, Tensor>> keys;
  const i64 group = p.heads_q / p.heads_kv;
  for (const auto& s : plan.slices) {
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
    part.qh = gather(q, {s.b, s.r0, s.h, 0}, {s.b + 1, s.r1, s.h + 1, p.head_dim});
    // Keys of (b, kv head, kend) once: slices of one head (and GQA groups) share them.
    auto [it, fresh] = keys.try_emplace(std::tuple{s.b, g, s.kend});
    if (fresh)
      it->second = {gather(k, {s.b, 0, g, 0}, {s.b + 1, s.kend, g + 1, p.head_dim}),
                    gather(v, {s.b, 0, g, 0}, {s.b + 1, s.kend, g + 1, p.head_dim_v})};
    part.kh = it->second.first;
    part.vh = it->second.second;
    kt.push_back(gather(out, {s.b, s.r0, s.h, 0}, {s.b + 1, s.r1, s.h + 1, p.head_dim_v}));
    t_gather += since(t0);
    t0 = std::chrono::steady_clock::now();
    rt.push_back(slice_reference(ps, q, k, v, s, g, part.qh, part.kh, part.vh));
    t_ref += since(t0);
    parts.push_back(std::move(part));
  }
  // The emulator and its floor twin on chunks of kEmuRows rows, in parallel: rows are independent
  // in the emulator (each walks its own keys), and a slice alone would keep one core busy
  // (ref::emulate parallelises over query tiles, of which a slice has one or two).
  constexpr i64 kEmuRows = 8;
  struct Chunk {
    std::size_t part;
    i64 a, b;
  };
  std::vector<Chunk> chunks;
  for (std::size_t i = 0; i < parts.size(); ++i)
    for (i64 a = 0; a < parts[i].ps.seqlen_q; a += kEmuRows) chunks.push_back({i, a, std::min(parts[i].ps.seqlen_q, a + kEmuRows)});
  std::vector<Tensor> eo(chunks.size()), eu(chunks.size()), fo(chunks.size()), fu(chunks.size());
  std::string emu_error;
  auto t0e = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(dynamic, 1)
  for (std::size_t ci = 0; ci < chunks.size(); ++ci) {
    try {
      const Chunk& ch = chunks[ci];
      const Part& part = parts[ch.part];
      Problem pc = part.ps;
      pc.seqlen_q = ch.b - ch.a;
      // causal_br keeps row r seeing keys [0, r + kend - n]: the chunk's last row ends
      // (n - b) keys before the slice's.
      pc.seqlen_kv = pc.mask == Mask::none ? part.ps.seqlen_kv : part.ps.seqlen_kv - (part.ps.seqlen_q - ch.b);
      const Tensor qc = conformance::token_slice(part.qh, ch.a, ch.b);
      const Tensor kc = conformance::token_slice(part.kh, 0, pc.seqlen_kv);
      const Tensor vc = conformance::token_slice(part.vh, 0, pc.seqlen_kv);
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
  if (!emu_error.empty()) throw Error("emulator: " + emu_error);
  const double t_emu = since(t0e);
  ref::AttentionOutput ref;
  ref.out = concat_rows(rt);
  ref::EmulatorOutput emu, rev;
  emu.out = concat_rows(eo);
  emu.out_unrounded = concat_rows(eu);
  rev.out = concat_rows(fo);
  rev.out_unrounded = concat_rows(fu);
  const Tensor K = concat_rows(kt);

  // The whole output, on the device: NaN/Inf anywhere (outside the sample too).
  auto t0 = std::chrono::steady_clock::now();
  const Cmp scan = compare_views(out, nullptr);
  const double t_scan = since(t0);
  const auto mref = metrics::compare(ref.out, ref.out);
  const bool ref_finite = mref.nan_ref == 0 && mref.inf_ref == 0;
  sample["timing_s"] = {{"gather", t_gather}, {"reference", t_ref}, {"emulator", t_emu}, {"scan", t_scan}};
  sample["output_scan"] = {{"elements", scan.count}, {"nonfinite", scan.nonfinite_a},
                           {"first_nonfinite", scan.first >= 0 ? json(index_of(out, scan.first)) : json(nullptr)}};
  sample["reference"] = q.device ? "gpu.ref64 (device buffers)" : "ref::attention fp64 (host)";

  const double secs = since(t_all);
  for (const auto& ch : checks) {
    Outcome o;
    if (ch == "accuracy") {
      o = conformance::judge_accuracy(tol.lookup(recipe_label(c.recipe), "accuracy"), K, Tensor{}, ref, emu, rev);
    } else if (!c.recipe.bitwise_capable()) {  // the gate's bitwise check refuses the same
      o = {Verdict::unsupported, "recipe uses hardware exp2: no bitwise model exists", json::object()};
    } else if (const auto ce = metrics::compare(emu.out, emu.out, 0); ce.norm_ref == 0 && ce.nan_ref == 0) {
      o = {Verdict::mistrusted, "emulator output is all zero: bitwise equality would prove nothing", json::object()};
    } else {
      const auto m = metrics::compare(K, emu.out, 8);
      json fig{{"out", comparison_json(m)}};
      if (m.bit_mismatches != 0) {
        const auto& mm = m.first_mismatches.front();
        // The sampled row index maps back to (b, s, h) of the whole output.
        i64 row = mm.index.size() > 1 ? mm.index[1] : 0, at = 0;
        const Slice* hit = &plan.slices.front();
        for (const auto& s : plan.slices) {
          if (row < at + (s.r1 - s.r0)) {
            hit = &s;
            break;
          }
          at += s.r1 - s.r0;
        }
        const i64 d = mm.index.size() > 3 ? mm.index[3] : 0;
        o = {Verdict::failed,
             fmt::format("{} of {} sampled output elements differ bitwise from the recipe emulator; first at [{},{},{},{}]: "
                         "{:.9g} vs {:.9g}",
                         m.bit_mismatches, m.count, hit->b, hit->r0 + (row - at), hit->h, d, mm.test, mm.ref),
             fig};
      } else {
        o = {Verdict::passed, "", fig};
      }
    }
    // The whole output, not only the sample: a NaN/Inf anywhere the sampled reference cannot explain.
    if (conformance::verdict_ok(o.verdict) && o.verdict != Verdict::unsupported && scan.nonfinite_a > 0 && ref_finite)
      o = {Verdict::mistrusted,
           fmt::format("kernel output has {} NaN/Inf elements (first at {}) while the sampled FP64 reference is finite",
                       scan.nonfinite_a, index_of(out, scan.first)),
           std::move(o.figures)};
    o.figures["sample"] = sample;
    emit(ch, std::move(o), secs);
  }
  return json{{"results", results}, {"exit_code", rc}, {"sample", sample}};
}

// determinism / call_path: one pair of outputs, bit for bit.
json op_same(const json& req, int& rc) {
  const conformance::Case c = case_from(req);
  const std::string check = req.value("check", std::string("determinism"));
  if (check != "determinism" && check != "call_path")
    throw Error(fmt::format("device_same: check '{}' is not determinism or call_path", check));
  const std::string what = req.value("what", std::string("second call"));
  const auto t0 = std::chrono::steady_clock::now();
  const View a = view_from(req, "a"), b = view_from(req, "b");
  const Problem& p = c.problem;
  expect_shape(a, "a", {p.batch, p.seqlen_q, p.heads_q, p.head_dim_v});
  const auto ea = extent(a), eb = extent(b);
  if (ea.first < eb.second && eb.first < ea.second) {
    // Comparing a buffer with itself proves nothing (a callable that returns one preallocated
    // output on every call overwrote the first result): not judged, and said so.
    json results = json::array({conformance::to_json(make_result(
        c, check,
        {Verdict::unsupported,
         what + ": the output shares memory with the first call's (the callable reuses one output buffer): the two "
                "results cannot be compared; return a fresh tensor per call",
         json::object()},
        since(t0)))});
    return json{{"results", results}, {"exit_code", 0}};
  }
  const Cmp m = compare_views(b, &a);
  json fig{{"elements", m.count}, {"differ", m.bit_diff}, {"max_abs", m.max_abs}, {"what", what}};
  Outcome o;
  if (m.bit_diff != 0) {
    const i64 e = m.first;
    const auto i = unravel(a, e);
    const std::array<i64, 4> i1{i[0] + 1, i[1] + 1, i[2] + 1, i[3] + 1};
    const float x = gather(b, i, i1).data<float>()[0];
    const float y = gather(a, i, i1).data<float>()[0];
    o = {Verdict::failed,
         fmt::format("{}: {} of {} output elements differ bitwise from the first call; first at {}: {:.9g} vs {:.9g}, max |diff| {:.3g}",
                     what, m.bit_diff, m.count, index_of(a, e), x, y, m.max_abs),
         fig};
  } else {
    o = {Verdict::passed, "", fig};
  }
  rc = conformance::verdict_ok(o.verdict) ? 0 : 1;
  json results = json::array({conformance::to_json(make_result(c, check, std::move(o), since(t0)))});
  return json{{"results", results}, {"exit_code", rc}};
}

json op_generate(const json& req) {
  const Problem p = parse_problem(req.at("problem").get<std::string>());
  const auto dist = datasets::parse_distribution(req.value("dist", std::string("normal")));
  const auto seed = req.value("seed", std::uint64_t{1});
  if (p.ragged()) throw Error("device_generate: ragged problems are not supported");
  const View q = view_from(req, "q"), k = view_from(req, "k"), v = view_from(req, "v");
  // generate_qkv's layout: contiguous float32 bshd.
  for (const auto& [x, name, h, s, d] : {std::tuple{&q, "q", p.heads_q, p.seqlen_q, p.head_dim},
                                         std::tuple{&k, "k", p.heads_kv, p.seqlen_kv, p.head_dim},
                                         std::tuple{&v, "v", p.heads_kv, p.seqlen_kv, p.head_dim_v}}) {
    expect_shape(*x, name, {p.batch, s, h, d});
    if (x->type != Elem::f32 || x->stride[3] != 1 || x->stride[2] != d || x->stride[1] != h * d || x->stride[0] != s * h * d)
      throw Error(fmt::format("device_generate: tensor '{}' must be contiguous float32 [B,S,H,D]", name));
    if (x->device != q.device) throw Error("device_generate: q, k and v must all be device or all host tensors");
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (!q.device) {  // host views: the CPU generator (the same bits; CI runs this side)
    const auto in = datasets::generate_qkv(p, dist, seed);
    for (const auto& [x, t] : {std::pair{&q, &in.q}, std::pair{&k, &in.k}, std::pair{&v, &in.v}})
      std::memcpy(reinterpret_cast<void*>(x->ptr), t->contiguous().data<float>(), static_cast<std::size_t>(t->numel()) * sizeof(float));
    return json{{"seconds", since(t0)}};
  }
#if ATTEST_PY_GPU
  gpu::generate_qkv_device(p, dist, seed, reinterpret_cast<float*>(q.ptr), reinterpret_cast<float*>(k.ptr),
                           reinterpret_cast<float*>(v.ptr));
  gpu::synchronize();
  return json{{"seconds", since(t0)}};
#else
  no_gpu("device_generate");
#endif
}

json op_info() {
#if ATTEST_PY_GPU
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

}  // namespace

bool is_device_op(const std::string& op) { return op.rfind("device_", 0) == 0; }

json op_device(const std::string& op, const json& req, int& rc) {
  rc = 0;
  if (op == "device_info") return op_info();
  if (op == "device_plan") return op_plan(req);
  if (op == "device_generate") return op_generate(req);
  if (op == "device_judge") return op_judge(req, rc);
  if (op == "device_same") return op_same(req, rc);
  throw Error("op '" + op + "' is not one of device_info, device_plan, device_generate, device_judge, device_same");
}

}  // namespace attest::py

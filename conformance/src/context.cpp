#include <chrono>
#include <cmath>
#include <cstring>

#include <omp.h>

#include "attest/conformance/check.hpp"
#include "attest/core/status.hpp"

namespace attest::conformance {
namespace {

// Offsets of one logical index in a (rank <= 4) tensor: a plain odometer, because Tensor has
// no iterator and the conformance buffers are at most a few million elements.
template <class F>
void for_each_index(const Shape& shape, F&& f) {
  const std::int64_t n = shape_numel(shape);
  Shape idx(shape.size(), 0);
  for (std::int64_t e = 0; e < n; ++e) {
    f(idx);
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

std::int64_t offset_of(const Tensor& t, const Shape& idx) {
  std::int64_t off = t.offset();
  for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides()[d];
  return off;
}

void fill_bits(const Tensor& t, std::uint32_t bits) {
  auto s = t.storage();
  for (std::size_t i = 0; i + 4 <= s.size(); i += 4) std::memcpy(s.data() + i, &bits, 4);
}

struct Geometry {
  Shape shape, strides;
  std::int64_t offset = 0, storage = 0;
};

// Strides of a logical [B,S,H,D] tensor stored in `layout`; `heads_total`/`head_offset` place it
// inside a packed [B,S,Htot,D] row.
Geometry geometry(const Shape& shape, Layout layout, std::int64_t pad, std::int64_t offset, std::int64_t slack,
                  std::int64_t heads_total, std::int64_t head_offset) {
  const std::int64_t B = shape[0], S = shape[1], H = shape[2], D = shape[3];
  Geometry g;
  g.shape = shape;
  g.offset = offset;
  switch (layout) {
    case Layout::bshd:
      g.strides = {S * H * D, H * D, D, 1};
      g.storage = B * S * H * D;
      break;
    case Layout::bhsd:
      g.strides = {H * S * D, D, S * D, 1};
      g.storage = B * S * H * D;
      break;
    case Layout::strided:
      g.strides = {S * H * (D + pad), H * (D + pad), D + pad, 1};
      g.storage = B * S * H * (D + pad);
      break;
    case Layout::packed_qkv:
      g.strides = {S * heads_total * D, heads_total * D, D, 1};
      g.offset += head_offset * D;
      g.storage = B * S * heads_total * D;
      break;
  }
  g.storage += offset + slack;
  return g;
}

// One tensor of a per-tensor-storage call; `base` is the problem's layout (packed_qkv -> bshd).
Geometry storage_geometry(const Shape& shape, Storage kind, Layout base, std::int64_t base_pad, std::int64_t pad,
                          std::int64_t offset, std::int64_t slack) {
  const std::int64_t B = shape[0], S = shape[1], H = shape[2], D = shape[3];
  if (base == Layout::packed_qkv) base = Layout::bshd, base_pad = 0;
  switch (kind) {
    case Storage::natural: return geometry(shape, base, base_pad, offset, slack, H, 0);
    case Storage::transposed: return geometry(shape, base == Layout::bhsd ? Layout::bshd : Layout::bhsd, 0, offset, slack, H, 0);
    case Storage::padded: return geometry(shape, Layout::strided, pad, offset, slack, H, 0);
    case Storage::row_slice: {
      // Tokens [x, x+S) of a [B, Tcap, H, D] cache: a non-zero start and a batch stride that is
      // not S*H*D.
      const std::int64_t x = 3, cap = S + x + 2;
      Geometry g;
      g.shape = shape;
      g.strides = {cap * H * D, H * D, D, 1};
      g.offset = offset + x * H * D;
      g.storage = B * cap * H * D + offset + slack;
      return g;
    }
    case Storage::head_slice: {
      const std::int64_t x = 1, cap = H + 2;
      Geometry g;
      g.shape = shape;
      g.strides = {S * cap * D, cap * D, D, 1};
      g.offset = offset + x * D;
      g.storage = B * S * cap * D + offset + slack;
      return g;
    }
  }
  return geometry(shape, base, base_pad, offset, slack, H, 0);
}

Tensor allocate(const Geometry& g, std::uint32_t fill) {
  Tensor t = Tensor::strided(DType::f32, g.shape, g.strides, g.offset, g.storage);
  fill_bits(t, fill);
  return t;
}

}  // namespace

Tensor token_slice(const Tensor& t, std::int64_t lo, std::int64_t hi) {
  const auto v = t.view<float, 4>();
  Tensor out(DType::f32, {v.shape[0], hi - lo, v.shape[2], v.shape[3]});
  const auto o = out.view<float, 4>();
  for (std::int64_t b = 0; b < v.shape[0]; ++b)
    for (std::int64_t s = lo; s < hi; ++s)
      for (std::int64_t h = 0; h < v.shape[2]; ++h)
        for (std::int64_t d = 0; d < v.shape[3]; ++d) o(b, s - lo, h, d) = v(b, s, h, d);
  return out;
}

Tensor bump_ulp(const Tensor& lse, float toward) {
  Tensor t = lse.contiguous();
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i)
    if (std::isfinite(p[i])) p[i] = std::nextafter(p[i], toward);
  return t;
}

void copy_values(const Tensor& src, const Tensor& dst) {
  if (src.shape() != dst.shape())
    throw Error("copy_values: shapes " + shape_string(src.shape()) + " and " + shape_string(dst.shape()) + " differ");
  const float* s = reinterpret_cast<const float*>(src.storage().data());
  float* d = reinterpret_cast<float*>(dst.storage().data());
  (void)src.data<float>();
  (void)dst.data<float>();
  if (src.rank() == 4) {
    // Rank 4 (every q, k, v, out of a call): rows along the last dimension, one memcpy where both
    // rows are contiguous. The same element pairs as the odometer below, without its per-element
    // index arithmetic (most of a long-sequence gate's input set-up).
    const auto& ss = src.strides();
    const auto& ds = dst.strides();
    const std::int64_t n3 = src.dim(3);
    for (std::int64_t i0 = 0; i0 < src.dim(0); ++i0)
      for (std::int64_t i1 = 0; i1 < src.dim(1); ++i1)
        for (std::int64_t i2 = 0; i2 < src.dim(2); ++i2) {
          const float* rs = s + src.offset() + i0 * ss[0] + i1 * ss[1] + i2 * ss[2];
          float* rd = d + dst.offset() + i0 * ds[0] + i1 * ds[1] + i2 * ds[2];
          if (ss[3] == 1 && ds[3] == 1) {
            if (n3 > 0) std::memcpy(rd, rs, static_cast<std::size_t>(n3) * sizeof(float));
          } else {
            for (std::int64_t i3 = 0; i3 < n3; ++i3) rd[i3 * ds[3]] = rs[i3 * ss[3]];
          }
        }
    return;
  }
  for_each_index(src.shape(), [&](const Shape& idx) { d[offset_of(dst, idx)] = s[offset_of(src, idx)]; });
}

LayoutInputs make_inputs(const Problem& p, const datasets::Qkv& logical, Layout layout, std::int64_t pad,
                         std::int64_t offset, std::int64_t slack) {
  const std::int64_t H = p.heads_q, Hkv = p.heads_kv;
  if (layout == Layout::packed_qkv) {
    if (logical.q.dim(1) != logical.k.dim(1) || p.cu_seqlens_q != p.cu_seqlens_kv || p.head_dim != p.head_dim_v)
      throw Error("layout packed_qkv needs S == T, equal ragged lengths and D == Dv (problem " + to_string(p) + ")");
  }
  // packed_qkv: q, k and v are separate buffers with the strides of one [B,S,H+2Hkv,D] row
  // each (core::Tensor has no sub-view constructor); the kernel sees the packed strides and
  // head offsets exactly as it would in a shared buffer.
  const std::int64_t W = H + 2 * Hkv;
  LayoutInputs in;
  in.q = allocate(geometry(logical.q.shape(), layout, pad, offset, slack, W, 0), 0);
  in.k = allocate(geometry(logical.k.shape(), layout, pad, offset, slack, W, H), 0);
  in.v = allocate(geometry(logical.v.shape(), layout, pad, offset, slack, W, H + Hkv), 0);
  copy_values(logical.q, in.q);
  copy_values(logical.k, in.k);
  copy_values(logical.v, in.v);
  return in;
}

KernelOutput make_outputs(const Problem& p, Layout layout, std::int64_t pad, std::int64_t offset, std::int64_t slack,
                          std::uint32_t fill, bool with_lse) {
  const std::int64_t B = p.ragged() ? 1 : p.batch;
  const std::int64_t S = p.ragged() ? p.cu_seqlens_q.back() : p.seqlen_q;
  const Layout out_layout = layout == Layout::packed_qkv ? Layout::bshd : layout;
  KernelOutput o;
  o.out = allocate(geometry({B, S, p.heads_q, p.head_dim_v}, out_layout, pad, offset, slack, p.heads_q, 0), fill);
  if (with_lse) {
    const std::int64_t row = S + (layout == Layout::strided ? pad : 0);
    o.lse = allocate({{B, p.heads_q, S}, {p.heads_q * row, row, 1}, offset, B * p.heads_q * row + offset + slack}, fill);
  }
  return o;
}

std::string_view storage_name(Storage s) {
  switch (s) {
    case Storage::natural: return "natural";
    case Storage::transposed: return "transposed";
    case Storage::row_slice: return "row_slice";
    case Storage::head_slice: return "head_slice";
    case Storage::padded: return "padded";
  }
  return "?";
}

Problem explicit_strides(const Problem& p) {
  Problem pv = p;
  pv.layout = Layout::strided;
  pv.pad = 0;
  return pv;
}

LayoutInputs make_inputs(const Problem& p, const datasets::Qkv& logical, const TensorStorage& st, std::int64_t pad,
                         std::int64_t offset, std::int64_t slack) {
  const std::int64_t bp = p.layout == Layout::strided ? p.pad : 0;
  LayoutInputs in;
  in.q = allocate(storage_geometry(logical.q.shape(), st.q, p.layout, bp, pad, offset, slack), 0);
  in.k = allocate(storage_geometry(logical.k.shape(), st.k, p.layout, bp, pad, offset, slack), 0);
  in.v = allocate(storage_geometry(logical.v.shape(), st.v, p.layout, bp, pad, offset, slack), 0);
  copy_values(logical.q, in.q);
  copy_values(logical.k, in.k);
  copy_values(logical.v, in.v);
  return in;
}

KernelOutput make_outputs(const Problem& p, const TensorStorage& st, std::int64_t pad, std::int64_t offset,
                          std::int64_t slack, std::uint32_t fill, bool with_lse) {
  const std::int64_t B = p.ragged() ? 1 : p.batch;
  const std::int64_t S = p.ragged() ? p.cu_seqlens_q.back() : p.seqlen_q;
  const std::int64_t bp = p.layout == Layout::strided ? p.pad : 0;
  KernelOutput o;
  o.out = allocate(storage_geometry({B, S, p.heads_q, p.head_dim_v}, st.out, p.layout, bp, pad, offset, slack), fill);
  if (with_lse) o.lse = allocate({{B, p.heads_q, S}, {p.heads_q * S, S, 1}, offset, B * p.heads_q * S + offset + slack}, fill);
  return o;
}

Context::Context(const Case& c, kernels::Kernel& kernel, const ToleranceTable& tolerances, CheckOptions options)
    : case_(c), kernel_(kernel), caps_(kernel.capabilities()), tol_(tolerances), opt_(options) {}

std::string Context::recipe_label() const { return attest::recipe_label(case_.recipe); }

const Status& Context::support() {
  if (!support_) support_ = kernel_.supports(case_.problem, case_.recipe);
  return *support_;
}

datasets::Qkv Context::inputs_for(const Problem& p) const {
  // The gate runs its groups with one OpenMP thread (gate.cpp); with device oracles it hands the
  // host's cores to the engine (device_threads), and the case's inputs, generated per case and per
  // variant, take them too: single-threaded generation was seconds of a 3k-token case on a GPU
  // host. Philox streams: the values do not depend on the thread count.
  const int team = options().device_oracles ? options().device_threads : 0;
  const int before = omp_get_max_threads();
  struct Restore {
    int n;
    bool on;
    ~Restore() {
      if (on) omp_set_num_threads(n);
    }
  } restore{before, team > before};
  if (team > before) omp_set_num_threads(team);
  try {
    return datasets::generate_qkv(p, case_.dist, case_.seed);
  } catch (const std::exception& e) {
    throw VerdictError(Verdict::invalid, std::string("inputs: ") + e.what());
  }
}

const datasets::Qkv& Context::inputs() {
  if (!inputs_) inputs_ = inputs_for(case_.problem);
  return *inputs_;
}

const ref::AttentionOutput& Context::ref64() {
  if (!ref64_) {
    const auto& in = inputs();
    try {
      ref64_ = ref::attention(case_.problem, in.q, in.k, in.v, ref::Precision::fp64);
    } catch (const std::exception& e) {
      throw VerdictError(Verdict::error, std::string("FP64 reference: ") + e.what());
    }
  }
  return *ref64_;
}

ref::EmulatorOutput Context::emulate(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                                     bool floor_twin) const {
  // A recipe with hardware exp2 has no bitwise model; its budget and floor come from the same
  // recipe with correctly rounded exp2 (the hardware approximation is then part of what the
  // tolerance row's alpha/beta must absorb).
  Recipe r = case_.recipe;
  if (r.exp2 == Exp2Policy::hw) r.exp2 = Exp2Policy::cr;
  try {
    return ref::emulate(p, r, q, k, v, floor_twin ? ref::floor_twin() : ref::EmulateOptions{});
  } catch (const std::exception& e) {
    throw VerdictError(Verdict::error, std::string("emulator: ") + e.what());
  }
}

const ref::EmulatorOutput& Context::emu() {
  if (!emu_) {
    const auto& in = inputs();
    emu_ = emulate(case_.problem, in.q, in.k, in.v, false);
  }
  return *emu_;
}

const ref::EmulatorOutput& Context::emu_rev() {
  if (!emu_rev_) {
    const auto& in = inputs();
    emu_rev_ = emulate(case_.problem, in.q, in.k, in.v, true);
  }
  return *emu_rev_;
}

KernelOutput Context::run_on(const Problem& p, const LayoutInputs& in, KernelOutput outputs,
                             const std::string& config) const {
  const kernels::Args args{p, case_.recipe, in.q, in.k, in.v, outputs.out, outputs.lse.empty() ? nullptr : &outputs.lse,
                           config};
  auto refused = [&] {
    if (!opt_.refusal_row)
      return VerdictError(Verdict::failed, "refuses at call time a case inside its declared capabilities: " + *refusal_);
    return VerdictError(Verdict::unsupported, "refused at call time: " + *refusal_ + " (judged by the refusal row)");
  };
  if (refusal_) throw refused();
  if (fault_)
    throw VerdictError(Verdict::unsupported, "not run: the kernel faulted earlier in this case (judged by the fault row: " +
                                                 *fault_ + ")");
  try {
    kernel_.run(args);
  } catch (const kernels::KernelFault& e) {
    fault_ = to_string(p) + (config.empty() ? "" : " config " + config);
    throw VerdictError(Verdict::fault, "kernel " + kernel_.name() + " faulted on " + to_string(p) +
                                           (config.empty() ? "" : " config " + config) + ": " + e.what());
  } catch (const kernels::KernelRefused& e) {
    refusal_ = e.what();
    throw refused();
  } catch (const std::exception& e) {
    throw VerdictError(Verdict::error, "kernel " + kernel_.name() + " threw on " + to_string(p) +
                                           (config.empty() ? "" : " config " + config) + ": " + e.what());
  }
  return outputs;
}

KernelOutput Context::run(const Problem& p, const datasets::Qkv& logical, const RunSetup& s) const {
  if (s.storage) {
    const auto in = make_inputs(p, logical, *s.storage, s.pad, s.offset, s.slack);
    return run_on(explicit_strides(p), in, make_outputs(p, *s.storage, s.pad, s.offset, s.slack, s.fill, caps_.lse),
                  s.config);
  }
  Problem pv = p;
  if (s.layout) {
    pv.layout = *s.layout;
    pv.pad = *s.layout == Layout::strided ? s.pad : 0;
  }
  const auto in = make_inputs(pv, logical, pv.layout, pv.pad, s.offset, s.slack);
  return run_on(pv, in, make_outputs(pv, pv.layout, pv.pad, s.offset, s.slack, s.fill, caps_.lse), s.config);
}

const KernelOutput& Context::baseline() {
  if (!baseline_) baseline_ = run(case_.problem, inputs());
  return *baseline_;
}

Result run_check(Context& ctx, const Check& check) {
  Result r;
  Case c = ctx.the_case();
  c.check = std::string(check.name());
  r.descriptor = to_string(c);
  r.kernel = c.kernel;
  r.recipe = ctx.recipe_label();
  r.problem = to_string(c.problem);
  r.dist = std::string(datasets::distribution_name(c.dist));
  r.seed = c.seed;
  r.check = c.check;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (check.needs_support() && !ctx.support()) {
      // Coverage: a refusal is UNSUPPORTED only where the kernel's declarations (recipes(),
      // capabilities()) exclude the case; refusing what it declares is a failure, else a
      // kernel that refuses everything would pass every check. It is judged once, by the
      // refusal row; the case's other checks point at it (one refusal, one failure).
      if (!ctx.caps().supports_declares && kernels::declared_support(ctx.kernel(), ctx.problem(), ctx.recipe())) {
        if (ctx.options().refusal_row) {
          r.outcome.verdict = Verdict::unsupported;
          r.outcome.reason = "refused inside its declarations: " + ctx.support().reason() + " (judged by the refusal row)";
        } else {
          r.outcome.verdict = Verdict::failed;
          r.outcome.reason = "refuses a case inside its declared recipes and capabilities: " + ctx.support().reason();
        }
      } else {
        r.outcome.verdict = Verdict::unsupported;
        r.outcome.reason = ctx.support().reason();
      }
    } else {
      r.outcome = check.run(ctx);
    }
  } catch (const VerdictError& e) {
    r.outcome = Outcome{e.verdict, e.what(), {}};
  } catch (const std::exception& e) {
    r.outcome = Outcome{Verdict::error, std::string(check.name()) + ": " + e.what(), {}};
  }
  // A failure the kernel's declarations accept knowingly (a written-up defect) is reported as
  // `accepted` with the declared reason beside the check's own: visible, never silently passed.
  if (r.outcome.verdict == Verdict::failed)
    for (const auto& [key, why] : ctx.caps().accepted)
      if (kernels::accept_covers(key, r.check, ctx.problem())) {
        r.outcome.verdict = Verdict::accepted;
        r.outcome.reason = "accepted (declared: " + why + "): " + r.outcome.reason;
        break;
      }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace attest::conformance

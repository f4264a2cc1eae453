// `attest check --capture`: a captured attention call judged by the gate's accuracy rule
// (judge_accuracy, accuracy.hpp) against the FP64 reference and the recipe's noise floor.
#include "attest/conformance/capture.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "attest/conformance/accuracy.hpp"
#include "attest/conformance/gate.hpp"
#include "attest/metrics/tensor_metrics.hpp"
#include "attest/conformance/verdict.hpp"
#include "attest/core/problem.hpp"
#include "attest/core/recipe.hpp"
#include "attest/core/status.hpp"
#include "attest/datasets/npy.hpp"
#include "attest/reference/attention.hpp"
#include "attest/reference/emulate.hpp"
#include "attest/reference/formats.hpp"
#include "attest/reference/quantize.hpp"

namespace attest::conformance {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string>& known_names() {
  static const std::vector<std::string> n{"q",        "k",       "v",        "out",     "lse",      "cu_seqlens_q",
                                          "cu_seqlens_k", "q_codes", "q_scales", "k_codes", "k_scales", "k_mean",
                                          "v_codes",  "v_scales"};
  return n;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// A named view of one captured tensor, so every error names the capture and the tensor.
class Reader {
 public:
  explicit Reader(const Capture& c) : c_(c) {
    for (const auto& t : c.tensors)
      if (std::find(known_names().begin(), known_names().end(), t.name) == known_names().end())
        fail("tensor '" + t.name + "' is not a capture tensor name (valid: " + join(known_names()) + ")");
  }
  [[noreturn]] void fail(const std::string& defect) const { throw Error(c_.source + ": " + defect); }
  const Tensor* find(const std::string& name) const {
    for (const auto& t : c_.tensors)
      if (t.name == name) return &t.tensor;
    return nullptr;
  }
  const Tensor& need(const std::string& name) const {
    const Tensor* t = find(name);
    if (!t) fail("required tensor '" + name + "' is missing (a capture holds q, k, v, out)");
    return *t;
  }
  std::optional<std::string> meta(const std::string& key) const {
    auto it = c_.metadata.find(key);
    if (it == c_.metadata.end()) return std::nullopt;
    return it->second;
  }

 private:
  const Capture& c_;
};

bool float_dtype(DType t) {
  return t == DType::f64 || t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::fp8_e4m3fn ||
         t == DType::fp8_e5m2;
}

// Element at byte pointer p of dtype t as float: f64 rounds once to nearest float (documented:
// a f64 capture is judged on its float32 values); the narrow formats decode exactly.
float element(const std::byte* p, DType t) {
  switch (t) {
    case DType::f64: {
      double d;
      std::memcpy(&d, p, 8);
      return static_cast<float>(d);
    }
    case DType::f32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::f16:
    case DType::bf16: {
      std::uint16_t u;
      std::memcpy(&u, p, 2);
      return ref::decode(t == DType::f16 ? attest::FormatId::fp16 : attest::FormatId::bf16, u);
    }
    case DType::fp8_e4m3fn: return ref::decode(attest::FormatId::fp8_e4m3fn, static_cast<std::uint8_t>(*p));
    case DType::fp8_e5m2: return ref::decode(attest::FormatId::fp8_e5m2, static_cast<std::uint8_t>(*p));
    default: throw Error("capture: not a float dtype");
  }
}

// A contiguous float32 copy of `src` (any strides, any float dtype) in its logical order,
// reshaped to `shape` (same element count).
Tensor to_f32(const Tensor& src, const Shape& shape) {
  Tensor out(DType::f32, shape);
  float* o = out.data<float>();
  const auto n = src.numel();
  const auto item = static_cast<std::int64_t>(dtype_size(src.dtype()));
  const std::byte* base = src.storage().data();
  Shape idx(src.shape().size(), 0);
  for (std::int64_t e = 0; e < n; ++e) {
    std::int64_t off = src.offset();
    for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * src.strides()[d];
    o[e] = element(base + off * item, src.dtype());
    for (int d = static_cast<int>(idx.size()) - 1; d >= 0; --d) {
      const auto ud = static_cast<std::size_t>(d);
      if (++idx[ud] < src.shape()[ud]) break;
      idx[ud] = 0;
    }
  }
  return out;
}

std::vector<std::int64_t> int_vector(const Reader& rd, const std::string& name, const Tensor& t) {
  if (t.rank() != 1) rd.fail("tensor '" + name + "' has shape " + shape_string(t.shape()) + ", need [B+1]");
  std::vector<std::int64_t> v;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype() == DType::i32) v.push_back(t.data<std::int32_t>()[i * t.strides()[0]]);
    else if (t.dtype() == DType::i64) v.push_back(t.data<std::int64_t>()[i * t.strides()[0]]);
    else rd.fail("tensor '" + name + "' has dtype " + std::string(dtype_name(t.dtype())) + ", need i32 or i64");
  }
  return v;
}

struct Interpreted {
  Problem problem;
  Recipe recipe;
  Tensor q, k, v, out, lse;  // f32, logical bshd (ragged [1,total,...]); lse may be empty
  Layout layout = Layout::bshd;
};

void expect_shape(const Reader& rd, const std::string& name, const Tensor& t, const Shape& want, const std::string& how) {
  if (t.shape() != want)
    rd.fail("tensor '" + name + "' has shape " + shape_string(t.shape()) + ", expected " + shape_string(want) + " (" + how + ")");
}

Interpreted interpret(const Capture& c, const CaptureOptions& opt) {
  const Reader rd(c);
  Interpreted in;
  const Tensor& q = rd.need("q");
  const Tensor& k = rd.need("k");
  const Tensor& v = rd.need("v");
  const Tensor& out = rd.need("out");
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}})
    if (!float_dtype(t->dtype()))
      rd.fail(std::string("tensor '") + name + "' has dtype " + std::string(dtype_name(t->dtype())) +
              ", need a float dtype (f64, f32, f16, bf16, fp8_e4m3fn, fp8_e5m2)");

  // Layout, mask, scale, recipe: option, else metadata, else default.
  auto setting = [&](const std::optional<std::string>& flag, const char* key) { return flag ? flag : rd.meta(key); };
  try {
    if (auto l = setting(opt.layout, "layout")) in.layout = parse_layout(*l);
    if (in.layout != Layout::bshd && in.layout != Layout::bhsd)
      rd.fail("layout '" + std::string(layout_name(in.layout)) + "' is not a capture layout (valid: bshd, bhsd)");
    if (auto m = setting(opt.mask, "mask")) in.problem.mask = parse_mask(*m);
  } catch (const Error& e) {
    rd.fail(e.what());
  }

  const Tensor* cu_q = rd.find("cu_seqlens_q");
  const Tensor* cu_k = rd.find("cu_seqlens_k");
  if ((cu_q == nullptr) != (cu_k == nullptr)) rd.fail("cu_seqlens_q and cu_seqlens_k must be given together");
  Problem& p = in.problem;
  const bool ragged = cu_q != nullptr;
  if (ragged) {
    if (in.layout != Layout::bshd) rd.fail("a ragged capture (cu_seqlens) must use layout bshd ([total, H, D])");
    p.cu_seqlens_q = int_vector(rd, "cu_seqlens_q", *cu_q);
    p.cu_seqlens_kv = int_vector(rd, "cu_seqlens_k", *cu_k);
    if (p.cu_seqlens_q.size() < 2 || p.cu_seqlens_q.size() != p.cu_seqlens_kv.size())
      rd.fail("cu_seqlens_q and cu_seqlens_k need the same length B+1 >= 2");
    p.batch = static_cast<std::int64_t>(p.cu_seqlens_q.size()) - 1;
    p.seqlen_q = p.seqlen_kv = 0;
    for (std::int64_t b = 0; b < p.batch; ++b) {
      const auto ub = static_cast<std::size_t>(b);
      p.seqlen_q = std::max(p.seqlen_q, p.cu_seqlens_q[ub + 1] - p.cu_seqlens_q[ub]);
      p.seqlen_kv = std::max(p.seqlen_kv, p.cu_seqlens_kv[ub + 1] - p.cu_seqlens_kv[ub]);
    }
    // [total, H, D] (FlashAttention varlen) or [1, total, H, D].
    auto dims = [&](const char* name, const Tensor& t) {
      if (t.rank() == 3) return Shape{1, t.dim(0), t.dim(1), t.dim(2)};
      if (t.rank() == 4 && t.dim(0) == 1) return t.shape();
      rd.fail(std::string("tensor '") + name + "' has shape " + shape_string(t.shape()) +
              ", a ragged capture needs [total, H, D] or [1, total, H, D]");
    };
    const Shape sq = dims("q", q), sk = dims("k", k), sv = dims("v", v), so = dims("out", out);
    p.heads_q = sq[2];
    p.head_dim = sq[3];
    p.heads_kv = sk[2];
    p.head_dim_v = sv[3];
    if (sq[1] != p.cu_seqlens_q.back()) rd.fail(fmt::format("tensor 'q' holds {} tokens, cu_seqlens_q ends at {}", sq[1], p.cu_seqlens_q.back()));
    if (sk[1] != p.cu_seqlens_kv.back()) rd.fail(fmt::format("tensor 'k' holds {} tokens, cu_seqlens_k ends at {}", sk[1], p.cu_seqlens_kv.back()));
    if (sv[1] != sk[1] || sv[2] != sk[2]) rd.fail("tensor 'v' has shape " + shape_string(v.shape()) + ", its tokens and heads must match k " + shape_string(k.shape()));
    if (sk[3] != p.head_dim) rd.fail("tensor 'k' has head dim " + std::to_string(sk[3]) + ", q has " + std::to_string(p.head_dim));
    if (so != Shape{1, sq[1], p.heads_q, p.head_dim_v})
      rd.fail("tensor 'out' has shape " + shape_string(out.shape()) + ", expected q's tokens and heads with v's head dim");
    in.q = to_f32(q, sq);
    in.k = to_f32(k, sk);
    in.v = to_f32(v, sv);
    in.out = to_f32(out, so);
  } else {
    for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}})
      if (t->rank() != 4)
        rd.fail(std::string("tensor '") + name + "' has shape " + shape_string(t->shape()) + ", need rank 4 (" +
                std::string(layout_name(in.layout)) + ")");
    // bhsd tensors are read through a permuted view: logical order is always (b, s, h, d).
    const std::vector<int> to_bshd{0, 2, 1, 3};
    const bool bhsd = in.layout == Layout::bhsd;
    const Tensor lq = bhsd ? q.permute(to_bshd) : q, lk = bhsd ? k.permute(to_bshd) : k;
    const Tensor lv = bhsd ? v.permute(to_bshd) : v, lo = bhsd ? out.permute(to_bshd) : out;
    set_sizes_bshd(p, lq.shape(), lk.shape(), lv.shape());
    const std::string how = bhsd ? "bhsd: [B, H, S, D] with B, H, D from q" : "bshd: [B, S, H, D] with B, H, D from q";
    auto in_layout = [&](Shape s) { return bhsd ? Shape{s[0], s[2], s[1], s[3]} : s; };
    expect_shape(rd, "k", k, in_layout({p.batch, p.seqlen_kv, p.heads_kv, p.head_dim}), how);
    expect_shape(rd, "v", v, in_layout({p.batch, p.seqlen_kv, p.heads_kv, p.head_dim_v}), how + ", T and Hkv from k");
    expect_shape(rd, "out", out, in_layout({p.batch, p.seqlen_q, p.heads_q, p.head_dim_v}), how + ", Dv from v");
    in.q = to_f32(lq, lq.shape());
    in.k = to_f32(lk, lk.shape());
    in.v = to_f32(lv, lv.shape());
    in.out = to_f32(lo, lo.shape());
  }
  if (p.heads_kv == 0 || p.heads_q % p.heads_kv != 0)
    rd.fail(fmt::format("q has {} heads, k {}: q heads must be a multiple of k heads (GQA)", p.heads_q, p.heads_kv));
  p.dtype = q.dtype();

  if (auto s = setting(opt.scale ? std::optional<std::string>(fmt::format("{:.17g}", *opt.scale)) : std::nullopt, "scale")) {
    double x = 0;
    std::istringstream is(*s);
    is >> x;
    if (!is || !is.eof() || !std::isfinite(x) || x <= 0) rd.fail("scale '" + *s + "' is not a finite number > 0");
    p.softmax_scale = x;
  }
  if (const Status st = p.validate(); !st) rd.fail("problem " + to_string(p) + ": " + st.reason());

  std::string recipe = "bf16";
  if (auto r = setting(opt.recipe, "recipe")) {
    recipe = *r;
  } else if (q.dtype() == DType::f16) {
    recipe = "fp16";
  } else if (q.dtype() == DType::f32 || q.dtype() == DType::f64) {
    recipe = "f32";
  } else if (q.dtype() != DType::bf16) {
    rd.fail("q has dtype " + std::string(dtype_name(q.dtype())) + ": name the recipe (--recipe or metadata 'recipe')");
  }
  try {
    in.recipe = parse_recipe(recipe);
  } catch (const Error& e) {
    rd.fail(e.what());
  }

  if (const Tensor* lse = rd.find("lse")) {
    if (lse->dtype() != DType::f32 && lse->dtype() != DType::f64)
      rd.fail("tensor 'lse' has dtype " + std::string(dtype_name(lse->dtype())) + ", need f32 or f64");
    const std::int64_t H = p.heads_q;
    Shape full;  // the tensor as [B, H, S']
    if (ragged) {
      const std::int64_t total = p.cu_seqlens_q.back();
      if (lse->rank() == 2 && lse->dim(0) == H && lse->dim(1) == total) full = {1, H, total};
      else if (lse->rank() == 3 && lse->dim(0) == 1 && lse->dim(1) == H && lse->dim(2) == total) full = lse->shape();
      else rd.fail("tensor 'lse' has shape " + shape_string(lse->shape()) + ", expected [H, total_q] or [1, H, total_q] = " + shape_string({1, H, total}));
    } else {
      if (lse->rank() != 3 || lse->dim(0) != p.batch || lse->dim(1) != H || lse->dim(2) < p.seqlen_q)
        rd.fail("tensor 'lse' has shape " + shape_string(lse->shape()) + ", expected [B, H, S'] with S' >= S: [" +
                std::to_string(p.batch) + ", " + std::to_string(H) + ", >= " + std::to_string(p.seqlen_q) + "]");
      full = lse->shape();
    }
    const Tensor all = to_f32(*lse, full);
    // Padded rows (e.g. memory-efficient attention rounds S up to 32) are dropped.
    const std::int64_t rows = ragged ? full[2] : p.seqlen_q;
    in.lse = Tensor(DType::f32, {full[0], H, rows});
    for (std::int64_t bh = 0; bh < full[0] * H; ++bh)
      std::memcpy(in.lse.data<float>() + bh * rows, all.data<float>() + bh * full[2], static_cast<std::size_t>(rows) * 4);
  }
  return in;
}

// Captured codes/scales against the reference quantizer on the captured operand: bitwise.
std::optional<Outcome> check_quantized(const Capture& c, const Interpreted& in) {
  const Reader rd(c);
  nlohmann::json fig = nlohmann::json::object();
  std::vector<std::string> checked;
  for (const auto& [op, scheme, x] :
       {std::tuple<std::string, Scheme, const Tensor*>{"q", in.recipe.q, &in.q}, {"k", in.recipe.k, &in.k},
        {"v", in.recipe.v, &in.v}}) {
    const Tensor* codes = rd.find(op + "_codes");
    const Tensor* scales = rd.find(op + "_scales");
    if (!codes && !scales) continue;
    if (!codes || !scales) rd.fail(op + "_codes and " + op + "_scales must be given together");
    try {
      ref::require_quantizer(scheme);
    } catch (const Error& e) {
      rd.fail(op + "_codes: recipe operand scheme '" + to_string(scheme) + "': " + e.what());
    }
    // The reference quantizer takes [lead..., T, C] slabs: (b, h) lead, tokens, channels.
    const Tensor xs = x->permute({0, 2, 1, 3});
    ref::QuantInputs qi;
    qi.sm_scale = in.problem.scale();
    Tensor mean;
    if (op == "k" && rd.find("k_mean")) {
      mean = to_f32(*rd.find("k_mean"), rd.find("k_mean")->shape());
      qi.mean = &mean;
    }
    ref::Quantized want;
    try {
      want = ref::quantize(xs, scheme, qi);
    } catch (const Error& e) {
      rd.fail(op + "_codes: the reference quantizer refuses the captured operand: " + e.what());
    }
    // Codes as captured, in the capture's layout, to logical (b, h, s, d) to compare with want.
    const bool bhsd = in.layout == Layout::bhsd;
    const Shape want_codes_bshd{xs.dim(0), xs.dim(2), xs.dim(1), xs.dim(3)};
    const Shape expected = bhsd ? xs.shape() : want_codes_bshd;
    // Ragged codes may also come as [total, H, D], like the varlen operand.
    Tensor c4 = *codes;
    if (in.problem.ragged() && codes->rank() == 3 && codes->shape() == Shape(expected.begin() + 1, expected.end())) {
      c4 = Tensor(codes->dtype(), expected);
      const Tensor cc = codes->contiguous();
      std::memcpy(c4.raw(), cc.raw(), static_cast<std::size_t>(cc.numel()) * dtype_size(cc.dtype()));
    }
    if (c4.shape() != expected)
      rd.fail("tensor '" + op + "_codes' has shape " + shape_string(codes->shape()) + ", expected " + shape_string(expected));
    if (dtype_size(codes->dtype()) != dtype_size(want.codes.dtype()))
      rd.fail("tensor '" + op + "_codes' has dtype " + std::string(dtype_name(codes->dtype())) + ", the scheme's codes are " +
              std::string(dtype_name(want.codes.dtype())));
    if (scales->numel() != want.scales.numel() || dtype_size(scales->dtype()) != dtype_size(want.scales.dtype()))
      rd.fail("tensor '" + op + "_scales' has shape " + shape_string(scales->shape()) + " " + std::string(dtype_name(scales->dtype())) +
              ", the scheme gives " + shape_string(want.scales.shape()) + " " + std::string(dtype_name(want.scales.dtype())));
    const Tensor got_codes = bhsd ? c4.contiguous() : c4.permute({0, 2, 1, 3}).contiguous();
    const Tensor want_c = want.codes.contiguous(), want_s = want.scales.contiguous(), got_s = scales->contiguous();
    const auto item = dtype_size(want_c.dtype());
    std::int64_t bad = 0, first = -1;
    for (std::int64_t i = 0; i < want_c.numel(); ++i)
      if (std::memcmp(got_codes.raw() + i * static_cast<std::int64_t>(item), want_c.raw() + i * static_cast<std::int64_t>(item), item) != 0) {
        if (first < 0) first = i;
        ++bad;
      }
    std::int64_t bad_s = 0, first_s = -1;
    const auto sitem = dtype_size(want_s.dtype());
    for (std::int64_t i = 0; i < want_s.numel(); ++i)
      if (std::memcmp(got_s.raw() + i * static_cast<std::int64_t>(sitem), want_s.raw() + i * static_cast<std::int64_t>(sitem), sitem) != 0) {
        if (first_s < 0) first_s = i;
        ++bad_s;
      }
    fig[op] = {{"scheme", attest::to_string(scheme)}, {"codes", want_c.numel()}, {"code_mismatches", bad},
               {"scales", want_s.numel()}, {"scale_mismatches", bad_s}};
    if (bad_s > 0)
      return Outcome{Verdict::failed,
                     fmt::format("{}_scales: {} of {} differ from the reference quantizer ({}); first at flat index {}", op, bad_s,
                                 want_s.numel(), attest::to_string(scheme), first_s),
                     fig};
    if (bad > 0)
      return Outcome{Verdict::failed,
                     fmt::format("{}_codes: {} of {} differ from the reference quantizer ({}); first at flat index {} of [B,H,S,D]", op,
                                 bad, want_c.numel(), attest::to_string(scheme), first),
                     fig};
    checked.push_back(op);
  }
  if (checked.empty()) return std::nullopt;
  return Outcome{Verdict::passed, {}, fig};
}

// j[key], or an empty object (avoids json::value(key, object()) temporaries, which GCC 12
// reports as maybe-uninitialized under -O3).
const nlohmann::json& sub(const nlohmann::json& j, const char* key) {
  static const nlohmann::json empty = nlohmann::json::object();
  if (!j.is_object()) return empty;
  const auto it = j.find(key);
  return it == j.end() ? empty : *it;
}

std::string sub_string(const nlohmann::json& j, const char* key) {
  const auto& v = sub(j, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

double as_double(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto s = j.get<std::string>();
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
    return NAN;
  }
  return NAN;
}

int severity(Verdict v) {
  switch (v) {
    case Verdict::passed: return 0;
    case Verdict::unsupported: return 1;
    case Verdict::mistrusted: return 2;
    case Verdict::invalid: return 3;
    case Verdict::failed: return 4;
    case Verdict::error: return 5;
    case Verdict::fault: return 6;
    case Verdict::accepted: return 1;
  }
  return 5;
}

std::string metric_cell(const CaptureResult& r, const char* m) {
  const auto& per = sub(sub(r.accuracy.figures, "judgement"), "metrics");
  if (!per.contains(m)) return "-";
  return fmt::format("{:.3g} / {:.3g}", as_double(per[m]["measured"]), as_double(per[m]["bound"]));
}

std::string cell(std::string s) {
  std::replace(s.begin(), s.end(), '|', '/');
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

}  // namespace

bool is_capture(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return path.extension() == ".safetensors";
  return fs::is_directory(path, ec) && fs::is_regular_file(path / "q.npy", ec);
}

std::vector<fs::path> find_captures(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(path.string() + ": no such file or directory");
  if (fs::is_regular_file(path, ec)) return {path};  // any file name: read_capture judges the content
  if (is_capture(path)) return {path};
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (is_capture(e.path())) out.push_back(e.path());
  if (ec) throw Error(path.string() + ": cannot list: " + ec.message());
  if (out.empty()) throw Error(path.string() + ": holds no capture (*.safetensors files or directories with q.npy)");
  std::sort(out.begin(), out.end());
  return out;
}

Capture read_capture(const fs::path& path) {
  Capture c;
  c.source = path.string();
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (!fs::is_regular_file(path / "q.npy", ec)) throw Error(c.source + ": directory without q.npy is not a capture");
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.path().extension() == ".npy") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) c.tensors.push_back({f.stem().string(), datasets::read_npy(f)});
    if (fs::exists(path / "metadata.json", ec)) {
      std::ifstream in(path / "metadata.json");
      std::stringstream ss;
      ss << in.rdbuf();
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(ss.str());
      } catch (const nlohmann::json::exception& e) {
        throw Error((path / "metadata.json").string() + ": not well-formed JSON: " + e.what());
      }
      if (!j.is_object()) throw Error((path / "metadata.json").string() + ": not an object of strings");
      for (const auto& [k, v] : j.items()) {
        if (!v.is_string()) throw Error((path / "metadata.json").string() + ": value of '" + k + "' is not a string");
        c.metadata[k] = v.get<std::string>();
      }
    }
    return c;
  }
  auto st = datasets::read_safetensors(path);
  c.tensors = std::move(st.tensors);
  c.metadata = std::move(st.metadata);
  return c;
}

void write_capture(OutputFiles& out, const fs::path& path, const Capture& c) {
  datasets::write_safetensors(out, path, c.tensors, c.metadata);
}

Verdict CaptureResult::verdict() const {
  Verdict v = accuracy.verdict;
  if (quantized && severity(quantized->verdict) > severity(v)) v = quantized->verdict;
  return v;
}

std::string CaptureResult::reason() const {
  if (accuracy.verdict != Verdict::passed) return "accuracy: " + accuracy.reason;
  if (quantized && quantized->verdict != Verdict::passed) return "quantized operands: " + quantized->reason;
  return {};
}

CaptureResult check_capture(const Capture& c, const CaptureOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const Interpreted in = interpret(c, opt);
  CaptureResult r;
  r.source = c.source;
  r.metadata = c.metadata;
  if (auto it = c.metadata.find("framework"); it != c.metadata.end()) r.framework = it->second;
  if (auto it = c.metadata.find("kernel"); it != c.metadata.end()) r.kernel = it->second;
  r.problem = to_string(in.problem);
  r.recipe = recipe_label(in.recipe);
  const ToleranceTable& tol = opt.tolerances ? *opt.tolerances : ToleranceTable::builtin();
  const ToleranceRow& row = tol.lookup(r.recipe, "accuracy");

  // The gate's oracles (Context::ref64 / emulate): FP64 reference; the recipe emulation and its
  // floor twin (K/V reversed, half tiles), with correctly rounded exp2 standing in for a hardware exp2.
  const auto ref64 = ref::attention(in.problem, in.q, in.k, in.v, ref::Precision::fp64);
  Recipe er = in.recipe;
  if (er.exp2 == Exp2Policy::hw) er.exp2 = Exp2Policy::cr;
  ref::EmulatorOutput emu, rev;
  try {
    emu = ref::emulate(in.problem, er, in.q, in.k, in.v);
    rev = ref::emulate(in.problem, er, in.q, in.k, in.v, ref::floor_twin());
  } catch (const Error& e) {
    throw Error(c.source + ": recipe " + r.recipe + " cannot be emulated on this capture: " + e.what());
  }
  r.accuracy = judge_accuracy(row, in.out, in.lse, ref64, emu, rev);
  // Bitwise agreement with the emulator: information (a capture declares no bitwise contract).
  r.accuracy.figures["emulator_bit_mismatches"] = metrics::bit_mismatch_count(in.out, emu.out);
  r.quantized = check_quantized(c, in);

  r.worst_ratio = 0;
  const auto& per = sub(sub(r.accuracy.figures, "judgement"), "metrics");
  for (const auto& [m, f] : per.items()) {
    if (!f.contains("bound")) continue;
    const double b = as_double(f["bound"]), x = as_double(f["measured"]);
    const double ratio = b > 0 ? x / b : (x > 0 ? INFINITY : 0);
    if (std::isnan(ratio) || ratio > r.worst_ratio || r.worst_metric.empty()) {
      r.worst_ratio = std::isnan(ratio) ? INFINITY : ratio;
      r.worst_metric = m;
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

nlohmann::json to_json(const CaptureResult& r) {
  nlohmann::json j{{"source", r.source},   {"framework", r.framework}, {"kernel", r.kernel},
                   {"problem", r.problem}, {"recipe", r.recipe},       {"verdict", verdict_name(r.verdict())},
                   {"reason", r.reason()}, {"metadata", r.metadata},   {"worst_metric", r.worst_metric},
                   {"worst_ratio", json_number(r.worst_ratio)},        {"seconds", r.seconds}};
  j["accuracy"] = {{"verdict", verdict_name(r.accuracy.verdict)}, {"reason", r.accuracy.reason}, {"figures", r.accuracy.figures}};
  if (r.quantized)
    j["quantized"] = {{"verdict", verdict_name(r.quantized->verdict)}, {"reason", r.quantized->reason}, {"figures", r.quantized->figures}};
  return j;
}

std::string capture_dump(const CaptureResult& r) {
  std::string s = fmt::format("capture: {}\n", r.source);
  if (!r.framework.empty() || !r.kernel.empty()) s += fmt::format("  framework: {}  kernel: {}\n", r.framework, r.kernel);
  s += fmt::format("  problem: {}\n  recipe: {}\n", r.problem, r.recipe);
  const auto& j = sub(r.accuracy.figures, "judgement");
  if (j.contains("row")) s += fmt::format("  tolerance row {}: {}\n", j["row"].get<int>(), sub_string(j, "row_reason"));
  s += fmt::format("  {:<14} {:>12} {:>12} {:>12} {:>12}  ok\n", "metric", "measured", "budget", "floor", "bound");
  for (const auto& [m, f] : sub(j, "metrics").items()) {
    if (f.contains("bound"))
      s += fmt::format("  {:<14} {:>12.4g} {:>12.4g} {:>12.4g} {:>12.4g}  {}\n", m, as_double(f["measured"]), as_double(f["budget"]),
                       as_double(f["floor"]), as_double(f["bound"]), f["ok"].get<bool>() ? "yes" : "NO");
    else
      s += fmt::format("  {:<14} {:>12.4g} {:>12} {:>12} {:>12.4g}  {}\n", m, as_double(f["measured"]), "", "",
                       as_double(f.contains("max") ? f["max"] : f["min"]), f["ok"].get<bool>() ? "yes" : "NO");
  }
  if (r.accuracy.figures.contains("emulator_bit_mismatches"))
    s += fmt::format("  elements differing bitwise from the recipe emulator: {}\n",
                     r.accuracy.figures["emulator_bit_mismatches"].get<std::int64_t>());
  if (r.quantized)
    s += fmt::format("  quantized operands: {}{}\n", verdict_name(r.quantized->verdict),
                     r.quantized->reason.empty() ? "" : ": " + r.quantized->reason);
  s += fmt::format("  verdict: {}{}\n", verdict_name(r.verdict()), r.reason().empty() ? "" : " (" + r.reason() + ")");
  return s;
}

std::string capture_markdown(const std::vector<CaptureResult>& results, const std::vector<CaptureError>& errors, std::size_t worst) {
  std::map<std::string, int> counts;
  for (const auto& r : results) ++counts[std::string(verdict_name(r.verdict()))];
  std::string head;
  for (const auto& [v, n] : counts) head += (head.empty() ? "" : ", ") + fmt::format("{} {}", n, v);
  if (!errors.empty()) head += (head.empty() ? "" : ", ") + fmt::format("{} malformed", errors.size());
  const bool ok = errors.empty() && std::all_of(results.begin(), results.end(), [](const auto& r) { return verdict_ok(r.verdict()); });
  std::string s = fmt::format("## attest check: {} ({} captures: {})\n\n", ok ? "PASS" : "FAIL", results.size() + errors.size(), head);
  s += "| capture | framework / kernel | problem | recipe | verdict | rel_l2 (measured / bound) | max_abs (measured / bound) | worst ratio |\n";
  s += "|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : results)
    s += fmt::format("| {} | {} | `{}` | {} | {} | {} | {} | {:.3g} ({}) |\n", cell(fs::path(r.source).filename().string()),
                     cell(r.framework + (r.kernel.empty() ? "" : " / " + r.kernel)), r.problem, cell(r.recipe),
                     verdict_name(r.verdict()), metric_cell(r, "rel_l2"), metric_cell(r, "max_abs"), r.worst_ratio, r.worst_metric);
  for (const auto& e : errors)
    s += fmt::format("| {} | | | | malformed | | | |\n", cell(fs::path(e.source).filename().string()));
  std::vector<const CaptureResult*> order;
  for (const auto& r : results) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) { return a->worst_ratio > b->worst_ratio; });
  if (!order.empty()) {
    s += fmt::format("\n### Worst {} by measured / bound\n\n", std::min(worst, order.size()));
    for (std::size_t i = 0; i < std::min(worst, order.size()); ++i) {
      const auto& r = *order[i];
      s += fmt::format("- {}: {} {:.3g} x its bound; {}{}\n", cell(r.source), r.worst_metric, r.worst_ratio, verdict_name(r.verdict()),
                       r.reason().empty() ? "" : ": " + cell(r.reason()));
    }
  }
  if (!errors.empty()) {
    s += "\n### Malformed\n\n";
    for (const auto& e : errors) s += "- " + cell(e.message) + "\n";
  }
  return s;
}

nlohmann::json capture_json(const std::vector<CaptureResult>& results, const std::vector<CaptureError>& errors) {
  nlohmann::json j;
  j["meta"] = suite_info();
  j["captures"] = nlohmann::json::array();
  std::map<std::string, int> counts;
  for (const auto& r : results) {
    j["captures"].push_back(to_json(r));
    ++counts[std::string(verdict_name(r.verdict()))];
  }
  j["malformed"] = nlohmann::json::array();
  for (const auto& e : errors) j["malformed"].push_back({{"source", e.source}, {"error", e.message}});
  j["counts"] = counts;
  return j;
}

}  // namespace attest::conformance

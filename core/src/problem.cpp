#include "attest/core/problem.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <utility>

#include "attest/core/enum_names.hpp"

namespace attest {
namespace {

constexpr std::array<std::pair<Mask, std::string_view>, 3> kMasks{{
    {Mask::none, "none"}, {Mask::causal_tl, "causal_tl"}, {Mask::causal_br, "causal_br"}}};
constexpr std::array<std::pair<Layout, std::string_view>, 4> kLayouts{{
    {Layout::bshd, "bshd"}, {Layout::bhsd, "bhsd"}, {Layout::packed_qkv, "packed_qkv"}, {Layout::strided, "strided"}}};

std::int64_t parse_int(std::string_view s, std::string_view what) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty())
    throw Error("problem: bad integer '" + std::string(s) + "' for " + std::string(what));
  return v;
}

double parse_double(std::string_view s, std::string_view what) {
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty())
    throw Error("problem: bad number '" + std::string(s) + "' for " + std::string(what));
  return v;
}

std::string shortest(double v) {
  // Shortest decimal that round-trips exactly (std::to_chars guarantee).
  std::array<char, 64> buf{};
  auto [p, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), p);
}

std::vector<std::int64_t> parse_list(std::string_view s, std::string_view what) {
  std::vector<std::int64_t> out;
  while (true) {
    const auto comma = s.find(',');
    out.push_back(parse_int(s.substr(0, comma), what));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

std::string join(const std::vector<std::int64_t>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

std::string_view mask_name(Mask m) { return kMasks[static_cast<std::size_t>(m)].second; }
Mask parse_mask(std::string_view s) { return parse_enum(s, kMasks, "mask"); }
std::string_view layout_name(Layout l) { return kLayouts[static_cast<std::size_t>(l)].second; }
Layout parse_layout(std::string_view s) { return parse_enum(s, kLayouts, "layout"); }

double Problem::scale() const {
  return softmax_scale ? *softmax_scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

std::int64_t Problem::len_q(std::int64_t b) const {
  return ragged() ? cu_seqlens_q[static_cast<std::size_t>(b + 1)] - cu_seqlens_q[static_cast<std::size_t>(b)] : seqlen_q;
}
std::int64_t Problem::len_kv(std::int64_t b) const {
  return ragged() ? cu_seqlens_kv[static_cast<std::size_t>(b + 1)] - cu_seqlens_kv[static_cast<std::size_t>(b)] : seqlen_kv;
}

std::int64_t Problem::visible_keys(std::int64_t b, std::int64_t i) const {
  const std::int64_t t = len_kv(b);
  switch (mask) {
    case Mask::none: return t;
    case Mask::causal_tl: return std::min(t, i + 1);
    case Mask::causal_br: return std::min(t, i + 1 + t - len_q(b));
  }
  return t;
}

double Problem::flops() const {
  double pairs = 0;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < len_q(b); ++i) pairs += static_cast<double>(std::max<std::int64_t>(0, visible_keys(b, i)));
  return 2.0 * static_cast<double>(head_dim + head_dim_v) * static_cast<double>(heads_q) * pairs;
}

Status Problem::validate() const {
  auto bad = [](std::string s) { return Status::unsupported(std::move(s)); };
  if (batch < 1 || heads_q < 1 || heads_kv < 1 || seqlen_q < 1 || seqlen_kv < 1 || head_dim < 1 || head_dim_v < 1)
    return bad("every extent must be >= 1");
  if (heads_q % heads_kv != 0)
    return bad("heads_q " + std::to_string(heads_q) + " is not a multiple of heads_kv " + std::to_string(heads_kv));
  if (softmax_scale && !(std::isfinite(*softmax_scale) && *softmax_scale > 0)) return bad("softmax_scale must be finite and > 0");
  if (pad < 0) return bad("pad must be >= 0");
  if (pad != 0 && layout != Layout::strided) return bad("pad is only meaningful with layout=strided");
  if (layout == Layout::packed_qkv && head_dim != head_dim_v) return bad("packed_qkv needs head_dim == head_dim_v");
  if (cu_seqlens_q.empty() != cu_seqlens_kv.empty()) return bad("ragged problems need both cu_q and cu_kv");
  if (ragged()) {
    for (const auto* cu : {&cu_seqlens_q, &cu_seqlens_kv}) {
      if (static_cast<std::int64_t>(cu->size()) != batch + 1) return bad("cu_seqlens must have batch+1 entries");
      if ((*cu)[0] != 0) return bad("cu_seqlens must start at 0");
      for (std::size_t i = 1; i < cu->size(); ++i)
        if ((*cu)[i] < (*cu)[i - 1]) return bad("cu_seqlens must be non-decreasing");
    }
    std::int64_t mq = 0, mk = 0;
    for (std::int64_t b = 0; b < batch; ++b) mq = std::max(mq, len_q(b)), mk = std::max(mk, len_kv(b));
    if (mq != seqlen_q || mk != seqlen_kv) return bad("s and t must be the largest ragged lengths");
  }
  return Status::ok();
}

std::string to_string(const Problem& p) {
  std::string s = "b" + std::to_string(p.batch) + "h" + std::to_string(p.heads_q);
  if (p.heads_kv != p.heads_q) s += "k" + std::to_string(p.heads_kv);
  s += "s" + std::to_string(p.seqlen_q);
  if (p.seqlen_kv != p.seqlen_q) s += "t" + std::to_string(p.seqlen_kv);
  s += "d" + std::to_string(p.head_dim);
  if (p.head_dim_v != p.head_dim) s += "v" + std::to_string(p.head_dim_v);
  const Problem def;
  if (p.mask != def.mask) s += ":mask=" + std::string(mask_name(p.mask));
  if (p.layout != def.layout) s += ":layout=" + std::string(layout_name(p.layout));
  if (p.pad != def.pad) s += ":pad=" + std::to_string(p.pad);
  if (p.softmax_scale) s += ":scale=" + shortest(*p.softmax_scale);
  if (p.dtype != def.dtype) s += ":dtype=" + std::string(dtype_name(p.dtype));
  if (p.ragged()) s += ":cu_q=" + join(p.cu_seqlens_q) + ":cu_kv=" + join(p.cu_seqlens_kv);
  return s;
}

void set_sizes_bshd(Problem& p, const std::vector<std::int64_t>& q, const std::vector<std::int64_t>& k,
                    const std::vector<std::int64_t>& v) {
  if (q.size() != 4 || k.size() != 4 || v.size() != 4) throw Error("set_sizes_bshd: q, k and v must have rank 4");
  p.batch = q[0];
  p.seqlen_q = q[1];
  p.heads_q = q[2];
  p.head_dim = q[3];
  p.seqlen_kv = k[1];
  p.heads_kv = k[2];
  p.head_dim_v = v[3];
}

Problem parse_problem(std::string_view text) {
  Problem p;
  const auto colon = text.find(':');
  std::string_view dims = text.substr(0, colon);
  bool seen_k = false, seen_t = false, seen_v = false;
  std::string seen;
  while (!dims.empty()) {
    const char key = dims[0];
    std::size_t n = 1;
    while (n < dims.size() && dims[n] >= '0' && dims[n] <= '9') ++n;
    const auto value = parse_int(dims.substr(1, n - 1), std::string(1, key));
    if (seen.find(key) != std::string::npos) throw Error("problem: dimension '" + std::string(1, key) + "' given twice in '" + std::string(text) + "'");
    seen += key;
    switch (key) {
      case 'b': p.batch = value; break;
      case 'h': p.heads_q = value; break;
      case 'k': p.heads_kv = value; seen_k = true; break;
      case 's': p.seqlen_q = value; break;
      case 't': p.seqlen_kv = value; seen_t = true; break;
      case 'd': p.head_dim = value; break;
      case 'v': p.head_dim_v = value; seen_v = true; break;
      default: throw Error("problem: unknown dimension '" + std::string(1, key) + "' in '" + std::string(text) + "' (valid: b h k s t d v)");
    }
    dims.remove_prefix(n);
  }
  if (!seen_k) p.heads_kv = p.heads_q;
  if (!seen_t) p.seqlen_kv = p.seqlen_q;
  if (!seen_v) p.head_dim_v = p.head_dim;
  std::string_view rest = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
  while (!rest.empty()) {
    const auto next = rest.find(':');
    const auto item = rest.substr(0, next);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) throw Error("problem: option '" + std::string(item) + "' needs key=value");
    const auto key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "mask") p.mask = parse_mask(value);
    else if (key == "layout") p.layout = parse_layout(value);
    else if (key == "pad") p.pad = parse_int(value, key);
    else if (key == "scale") p.softmax_scale = parse_double(value, key);
    else if (key == "dtype") p.dtype = parse_dtype(value);
    else if (key == "cu_q") p.cu_seqlens_q = parse_list(value, key);
    else if (key == "cu_kv") p.cu_seqlens_kv = parse_list(value, key);
    else throw Error("problem: unknown option '" + std::string(key) + "' (valid: mask layout pad scale dtype cu_q cu_kv)");
    if (next == std::string_view::npos) break;
    rest.remove_prefix(next + 1);
  }
  if (auto st = p.validate(); !st) throw Error("problem '" + std::string(text) + "': " + st.reason());
  return p;
}

}  // namespace attest

#include <fnmatch.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "attest/kernels/kernel.hpp"

namespace attest::kernels {

Status Kernel::supports(const Problem& p, const Recipe& r) const { return declared_support(*this, p, r); }

Status declared_support(const Kernel& k, const Problem& p, const Recipe& r) {
  if (auto st = p.validate(); !st) return st;
  const auto names = k.recipes();
  const auto label = recipe_label(r);
  if (std::find(names.begin(), names.end(), label) == names.end())
    return Status::unsupported("recipe " + label + " is not implemented by " + k.name());
  const Capabilities c = k.capabilities();
  if (!c.unavailable.empty()) return Status::unsupported(c.unavailable);
  if (c.head_dim_multiple > 1 && p.head_dim % c.head_dim_multiple != 0)
    return Status::unsupported("head_dim " + std::to_string(p.head_dim) + " is not a multiple of " +
                               std::to_string(c.head_dim_multiple));
  if (!c.head_dims.empty() && std::find(c.head_dims.begin(), c.head_dims.end(), p.head_dim) == c.head_dims.end())
    return Status::unsupported("head_dim " + std::to_string(p.head_dim) + " not supported");
  if (std::find(c.masks.begin(), c.masks.end(), p.mask) == c.masks.end())
    return Status::unsupported("mask " + std::string(mask_name(p.mask)) + " not supported");
  if (std::find(c.layouts.begin(), c.layouts.end(), p.layout) == c.layouts.end())
    return Status::unsupported("layout " + std::string(layout_name(p.layout)) + " not supported");
  if (!c.gqa && p.heads_kv != p.heads_q) return Status::unsupported("GQA/MQA not supported");
  if (!c.cross && p.seqlen_kv != p.seqlen_q) return Status::unsupported("cross attention (S != T) not supported");
  if (!c.ragged && p.ragged()) return Status::unsupported("ragged batches not supported");
  if (!c.head_dim_v && p.head_dim_v != p.head_dim) return Status::unsupported("head_dim_v != head_dim not supported");
  if (!c.causal_cross && p.mask != Mask::none &&
      (p.ragged() ? p.cu_seqlens_q != p.cu_seqlens_kv : p.seqlen_q != p.seqlen_kv))
    return Status::unsupported("causal mask with S != T is outside the declaration (causal_cross = false)");
  if (c.row_align > 1) {
    // Every other stride and offset of the problem's layouts is a multiple of the head-row
    // stride (packed_qkv's head offsets are multiples of D), so the row stride decides.
    const std::int64_t pad = p.layout == Layout::strided ? p.pad : 0;
    for (std::int64_t row : {p.head_dim + pad, p.head_dim_v + pad})
      if (row % c.row_align != 0)
        return Status::unsupported("row stride of " + std::to_string(row) +
                                   " elements is not a multiple of the declared row_align " + std::to_string(c.row_align));
  }
  return Status::ok();
}

namespace {
struct AcceptKey {
  std::string_view check, field;
  std::int64_t modulus = 0;  // 0: unscoped
};
AcceptKey parse_accept_key(std::string_view key) {
  AcceptKey a{key, {}, 0};
  const auto at = key.find('@');
  if (at == std::string_view::npos) return a;
  a.check = key.substr(0, at);
  const std::string_view scope = key.substr(at + 1);
  const auto pc = scope.find('%');
  const std::string_view field = scope.substr(0, pc);
  if (field != "seqlen_q" && field != "seqlen_kv" && field != "head_dim" && field != "head_dim_v")
    throw Error("accept key '" + std::string(key) + "': scope field '" + std::string(field) +
                "' unknown (valid: seqlen_q, seqlen_kv, head_dim, head_dim_v, as check@field%n)");
  a.field = field;
  const std::string n = pc == std::string_view::npos ? "" : std::string(scope.substr(pc + 1));
  // Plain decimal digits, no sign, space or leading zero (the Python side's rule too).
  const bool digits = !n.empty() && n.size() <= 9 && n[0] != '0' &&
                      n.find_first_not_of("0123456789") == std::string::npos;
  a.modulus = digits ? std::stoll(n) : 0;
  if (a.check.empty() || a.modulus < 2)
    throw Error("accept key '" + std::string(key) + "' is not check@field%n with an integer n >= 2");
  return a;
}
}  // namespace

void validate_accept_key(std::string_view key) { (void)parse_accept_key(key); }

bool accept_covers(std::string_view key, std::string_view check, const Problem& p) {
  const AcceptKey a = parse_accept_key(key);
  if (a.check != check) return false;
  if (a.modulus == 0) return true;
  auto off = [&](std::int64_t x) { return x % a.modulus != 0; };
  if (a.field == "head_dim") return off(p.head_dim);
  if (a.field == "head_dim_v") return off(p.head_dim_v);
  for (std::int64_t b = 0; b < p.batch; ++b)
    if (off(a.field == "seqlen_q" ? p.len_q(b) : p.len_kv(b))) return true;
  return false;
}

std::vector<std::string> declared_properties(const Capabilities& c) {
  std::vector<std::string> v;
  auto join = [](const auto& xs, auto name) {
    std::string s;
    for (const auto& x : xs) s += (s.empty() ? "" : ",") + std::string(name(x));
    return s;
  };
  if (c.ftz) v.emplace_back("ftz");
  for (const auto& [check, why] : c.accepted) v.push_back("accepts " + check + " (" + why + ")");
  if (c.row_align > 1) v.push_back("row_align=" + std::to_string(c.row_align));
  if (!c.causal_cross) v.emplace_back("causal_cross=false");
  if (c.supports_declares) v.emplace_back("supports() declares limits");
  if (c.bitwise) v.emplace_back("bitwise");
  if (!c.deterministic) v.emplace_back("deterministic=false");
  if (c.graph_capturable) v.emplace_back("graph_capturable");
  if (!c.lse) v.emplace_back("lse=false");
  if (!c.gqa) v.emplace_back("gqa=false");
  if (!c.cross) v.emplace_back("cross=false");
  if (!c.ragged) v.emplace_back("ragged=false");
  if (!c.head_dim_v) v.emplace_back("head_dim_v=false");
  if (!c.head_dims.empty()) v.push_back("head_dims=" + join(c.head_dims, [](std::int64_t d) { return std::to_string(d); }));
  if (c.head_dim_multiple > 1) v.push_back("head_dim_multiple=" + std::to_string(c.head_dim_multiple));
  if (c.masks.size() != 3) v.push_back("masks=" + join(c.masks, mask_name));
  if (c.layouts.size() != 4) v.push_back("layouts=" + join(c.layouts, layout_name));
  if (c.planted_bug) v.emplace_back("planted_bug");
  return v;
}

Status aligned_rows(const Capabilities& c, const Args& a) {
  if (c.row_align <= 1) return Status::ok();
  const std::pair<const char*, const Tensor*> ts[] = {{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"out", &a.out}};
  for (const auto& [name, t] : ts) {
    const auto& st = t->strides();
    for (std::size_t d = 0; d + 1 < st.size(); ++d)
      if (t->shape()[d] > 1 && st[d] % c.row_align != 0)
        return Status::unsupported(std::string(name) + ": row stride of " + std::to_string(st[d]) +
                                   " elements is not a multiple of the declared row_align " + std::to_string(c.row_align));
    if (t->offset() % c.row_align != 0)
      return Status::unsupported(std::string(name) + ": start offset of " + std::to_string(t->offset()) +
                                 " elements is not a multiple of the declared row_align " + std::to_string(c.row_align));
  }
  return Status::ok();
}

Registry& Registry::instance() {
  static Registry r;
  return r;
}

void Registry::add(std::unique_ptr<Kernel> k) {
  if (find(k->name()) != nullptr) throw Error("kernel '" + k->name() + "' registered twice");
  kernels_.push_back(std::move(k));
}

Kernel* Registry::find(std::string_view name) const {
  for (const auto& k : kernels_)
    if (k->name() == name) return k.get();
  return nullptr;
}

std::vector<Kernel*> Registry::match(std::string_view glob) const {
  const std::string g(glob);
  std::vector<Kernel*> out;
  for (const auto& k : kernels_)
    if (::fnmatch(g.c_str(), k->name().c_str(), 0) == 0) out.push_back(k.get());
  return out;
}

bool Registry::selects_planted_bugs(std::string_view glob) const {
  const auto ks = match(glob);
  return !ks.empty() && std::all_of(ks.begin(), ks.end(), [](const Kernel* k) { return k->capabilities().planted_bug; });
}

Registrar::Registrar(const std::function<std::vector<std::unique_ptr<Kernel>>()>& make) {
  for (auto& k : make()) Registry::instance().add(std::move(k));
}

}  // namespace attest::kernels

#include <fnmatch.h>

#include <algorithm>

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

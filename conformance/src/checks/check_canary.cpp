// canary: 512-element guard zones (cuDNN's margin) before and after out and lse, and the pad
// gaps of a strided out, keep their pattern; inputs stay byte-identical.
#include <algorithm>
#include <vector>

#include "common.hpp"

namespace attest::conformance::checks {
namespace {

constexpr std::uint32_t kCanary = 0x7FA11CE5u;  // a NaN no arithmetic produces by accident
constexpr std::int64_t kGuard = 512;

// Storage elements outside the view that lost the canary: count and the first (storage offset
// relative to the first element, negative before it).
std::pair<std::int64_t, std::int64_t> trampled(const Tensor& t) {
  const auto s = t.storage();
  const std::size_t n = s.size() / 4;
  std::vector<bool> inside(n, false);
  Shape idx(t.shape().size(), 0);
  for (std::int64_t e = 0; e < t.numel(); ++e) {
    std::int64_t o = t.offset();
    for (std::size_t d = 0; d < idx.size(); ++d) o += idx[d] * t.strides()[d];
    inside[static_cast<std::size_t>(o)] = true;
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.shape()[d]) break;
      idx[d] = 0;
    }
  }
  const auto* w = reinterpret_cast<const std::uint32_t*>(s.data());
  std::int64_t count = 0, first = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (!inside[i] && w[i] != kCanary && count++ == 0) first = static_cast<std::int64_t>(i) - t.offset();
  return {count, first};
}

Outcome guards_intact(const Check&, Context& ctx) {
  const Problem& p = ctx.problem();
  nlohmann::json fig;
  fig["guard_elements"] = kGuard;
  std::vector<Layout> layouts{p.layout};
  const auto& lay = ctx.caps().layouts;
  if (p.layout != Layout::strided && std::find(lay.begin(), lay.end(), Layout::strided) != lay.end())
    layouts.push_back(Layout::strided);  // also the gaps between padded head rows
  // Offsets and pads stay multiples of the declared row_align (a kernel that needs aligned rows
  // is not asked to take unaligned ones).
  const std::int64_t align = std::max<std::int64_t>(1, ctx.caps().row_align);
  const std::int64_t guard = (kGuard + align - 1) / align * align;
  for (const Layout l : layouts) {
    Problem pv = p;
    pv.layout = l;
    if (l != p.layout) pv.pad = align > 1 ? align : 3;
    if (!ctx.kernel().supports(pv, ctx.recipe())) continue;
    const auto in = make_inputs(pv, ctx.inputs(), pv.layout, pv.pad, guard, guard);
    std::vector<std::vector<std::byte>> before;
    for (const Tensor* t : {&in.q, &in.k, &in.v}) before.emplace_back(t->storage().begin(), t->storage().end());
    auto outs = make_outputs(pv, pv.layout, pv.pad, guard, guard, kCanary, ctx.caps().lse);
    // The view's own elements are poisoned too; only what lies outside must keep the canary.
    const auto res = ctx.run_on(pv, in, std::move(outs), "");
    const std::string tag(layout_name(l));
    for (const char* what : {"out", "lse"}) {
      const Tensor& t = std::string_view(what) == "out" ? res.out : res.lse;
      if (t.empty()) continue;
      const auto [n, first] = trampled(t);
      fig[tag][what] = {{"trampled", n}};
      if (n > 0)
        return failed(fmt::format("{} ({}): {} guard elements overwritten; first at storage offset {} from element 0", what,
                                  tag, n, first),
                      fig);
    }
    const char* names[] = {"q", "k", "v"};
    const Tensor* ts[] = {&in.q, &in.k, &in.v};
    for (int i = 0; i < 3; ++i) {
      const auto s = ts[i]->storage();
      if (!std::equal(s.begin(), s.end(), before[static_cast<std::size_t>(i)].begin()))
        return failed(fmt::format("input {} ({}) was modified by the kernel", names[i], tag), fig);
    }
  }
  return passed(fig);
}

}  // namespace
std::unique_ptr<Check> make_canary() { return make_check("canary", "guard zones around out/lse intact, inputs unchanged", guards_intact); }
}  // namespace attest::conformance::checks

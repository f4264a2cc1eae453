// poison: out and lse prefilled with two different NaN patterns in two runs; an element that
// holds its run's pattern both times was never written (a kernel may legitimately write a NaN,
// but not one that follows the prefill).
#include "common.hpp"

namespace attest::conformance::checks {
namespace {

constexpr std::uint32_t kFillA = 0x7FC0DEADu;  // quiet NaN, payload 0xDEAD
constexpr std::uint32_t kFillB = 0xFFBADBADu;  // negative quiet NaN, another payload

// Logical indices of elements equal to fill_a in a and fill_b in b.
std::pair<std::int64_t, Shape> unwritten(const Tensor& a, const Tensor& b, std::uint32_t fa, std::uint32_t fb) {
  std::int64_t n = 0;
  Shape first;
  const auto* pa = reinterpret_cast<const std::uint32_t*>(a.storage().data());
  const auto* pb = reinterpret_cast<const std::uint32_t*>(b.storage().data());
  const auto& shape = a.shape();
  Shape idx(shape.size(), 0);
  for (std::int64_t e = 0; e < a.numel(); ++e) {
    std::int64_t oa = a.offset(), ob = b.offset();
    for (std::size_t d = 0; d < idx.size(); ++d) oa += idx[d] * a.strides()[d], ob += idx[d] * b.strides()[d];
    if (pa[oa] == fa && pb[ob] == fb && n++ == 0) first = idx;
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return {n, first};
}

Outcome all_written(const Check&, Context& ctx) {
  RunSetup sa, sb;
  sa.fill = kFillA;
  sb.fill = kFillB;
  const auto a = ctx.run(ctx.problem(), ctx.inputs(), sa);
  const auto b = ctx.run(ctx.problem(), ctx.inputs(), sb);
  nlohmann::json fig;
  for (const char* what : {"out", "lse"}) {
    const bool is_out = std::string_view(what) == "out";
    const Tensor& ta = is_out ? a.out : a.lse;
    const Tensor& tb = is_out ? b.out : b.lse;
    if (ta.empty()) continue;
    const auto [n, first] = unwritten(ta, tb, kFillA, kFillB);
    fig[what] = {{"elements", ta.numel()}, {"unwritten", n}};
    if (n > 0) {
      fig[what]["first_unwritten"] = first;
      return failed(fmt::format("{} of {} {} elements never written; first at {}", n, ta.numel(), what,
                                metrics::index_string(first)),
                    fig);
    }
  }
  return passed(fig);
}

}  // namespace
std::unique_ptr<Check> make_poison() { return make_check("poison", "every out/lse element is written (NaN-prefilled twice)", all_written); }
}  // namespace attest::conformance::checks

#include "attest/core/format.hpp"

#include <string>

#include "attest/core/status.hpp"

namespace attest {
namespace {

// kFormatTable is indexed by FormatId: each row's name must be its enumerator's spelling.
constexpr bool table_in_enum_order() {
  constexpr std::array<std::string_view, 12> spelled{"bf16", "fp16", "fp8_e4m3fn", "fp8_e5m2", "fp8_e4m3fnuz",
                                                     "fp8_e5m2fnuz", "fp6_e2m3fn", "fp6_e3m2fn", "fp4_e2m1fn",
                                                     "e8m0fnu", "int8", "f32"};
  for (std::size_t i = 0; i < spelled.size(); ++i)
    if (kFormatTable[i].name != spelled[i]) return false;
  return static_cast<std::size_t>(FormatId::f32) + 1 == kFormatTable.size();
}
static_assert(table_in_enum_order());

constexpr std::array<FormatId, 12> kAllIds{FormatId::bf16, FormatId::fp16, FormatId::fp8_e4m3fn, FormatId::fp8_e5m2,
                                           FormatId::fp8_e4m3fnuz, FormatId::fp8_e5m2fnuz, FormatId::fp6_e2m3fn,
                                           FormatId::fp6_e3m2fn, FormatId::fp4_e2m1fn, FormatId::e8m0fnu,
                                           FormatId::int8, FormatId::f32};

}  // namespace

std::span<const FormatId> all_format_ids() { return kAllIds; }

FormatId parse_format_id(std::string_view n) {
  std::string valid;
  for (FormatId f : kAllIds) {
    if (name(f) == n) return f;
    valid += (valid.empty() ? "" : ", ") + std::string(name(f));
  }
  throw Error("unknown format '" + std::string(n) + "' (valid: " + valid + ")");
}

}  // namespace attest

#pragma once
/// Name tables of enums (a constexpr array of {value, name} pairs) and their two lookups, so every
/// string form (Problem, Recipe, reference options) names its enums, and refuses unknown names,
/// the same way. Hand-written: the standard library has no enum reflection and a dependency for
/// four lines is not worth it.
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "attest/core/status.hpp"

namespace attest {

template <class E, std::size_t N>
using EnumNames = std::array<std::pair<E, std::string_view>, N>;

/// The value named `s`; throws attest::Error "<prefix>unknown <what> '<s>' (valid: a, b, ...)".
template <class E, std::size_t N>
E parse_enum(std::string_view s, const EnumNames<E, N>& table, std::string_view what, std::string_view prefix = {}) {
  std::string valid;
  for (const auto& [e, name] : table) {
    if (name == s) return e;
    valid += (valid.empty() ? "" : ", ") + std::string(name);
  }
  throw Error(std::string(prefix) + "unknown " + std::string(what) + " '" + std::string(s) + "' (valid: " + valid + ")");
}

/// The name of `e`, "?" when the table lacks it.
template <class E, std::size_t N>
std::string_view enum_name(E e, const EnumNames<E, N>& table) {
  for (const auto& [k, name] : table)
    if (k == e) return name;
  return "?";
}

}  // namespace attest

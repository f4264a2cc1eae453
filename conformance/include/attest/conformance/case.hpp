#pragma once
/// A conformance case: kernel + recipe + problem + distribution + seed (+ check). Its descriptor
/// is one line of space-separated key=value fields that round-trips:
///   kernel=cpu.tiled.bf16 recipe=bf16 problem=b1h2s256d64:mask=causal_tl dist=normal seed=3 check=accuracy
/// `recipe` is a named recipe or a full recipe string (it may hold ';', ':' and '=' but never a
/// space or a quote); the canonical form prints the named label when the recipe equals one.
/// `check` is optional (absent: every registered check). The repro line single-quotes the whole
/// descriptor: attest run '<descriptor>'.
#include <cstdint>
#include <string>
#include <string_view>

#include "attest/core/problem.hpp"
#include "attest/core/recipe.hpp"
#include "attest/datasets/distributions.hpp"

namespace attest::conformance {

struct Case {
  std::string kernel;
  Recipe recipe;
  Problem problem;
  datasets::Distribution dist = datasets::Distribution::normal;
  std::uint64_t seed = 1;
  std::string check;  ///< "" = every check

  bool operator==(const Case&) const = default;
};

/// Canonical descriptor (fields in the order kernel recipe problem dist seed [check]).
std::string to_string(const Case& c);
/// Parses a descriptor; fields may come in any order, kernel/recipe/problem/dist/seed are
/// required. Throws attest::Error naming the field and the defect.
Case parse_case(std::string_view descriptor);
/// `attest run '<descriptor>'`
std::string repro_line(const Case& c);
/// The descriptor without the check: identifies the inputs and outputs checks can share.
std::string group_key(const Case& c);

}  // namespace attest::conformance

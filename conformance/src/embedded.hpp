#pragma once
// Data files compiled into the binary at configure time (and the build stamp) (conformance/CMakeLists.txt), so that a
// binary copied to a device host needs nothing beside it.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attest::conformance::embedded {

/// (name, contents): "tolerances.json", "profiles/<p>.json", "cases/<set>.cases".
const std::vector<std::pair<std::string_view, std::string_view>>& files();
/// nullptr-like empty view when absent.
std::string_view find(std::string_view name);
/// The git commit of the source tree at build time ("unknown" outside git; conformance/stamp.cmake).
std::string_view git_commit();
/// Tracked files differed from that commit at build time (true outside git: not shown clean).
bool git_dirty();

}  // namespace attest::conformance::embedded

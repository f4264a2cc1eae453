#pragma once
// The shape sets of datasets/shapes/*.shapes, compiled into the binary at configure time
// (conformance/bench.cmake) so a binary copied to a GPU host needs nothing beside it.
#include <string_view>
#include <utility>
#include <vector>

namespace attest::conformance::bench_shapes {
/// (set name, file contents), sorted by name.
const std::vector<std::pair<std::string_view, std::string_view>>& files();
}  // namespace attest::conformance::bench_shapes

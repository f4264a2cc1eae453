#pragma once
/// `attest bench`: throughput of registered kernels on model shapes. A bench report is JSON
/// (docs/bench.md): meta (suite, host, timer settings) and one row per case, where a case is
/// kernel x recipe x problem (attention) or operand x scheme x problem (quantizer). Timing
/// rules, the same for every backend:
///   - warm-up calls are excluded; then `repeat` samples, each the mean of enough back-to-back
///     calls to last at least `min_sample_ms` (host clocks cannot resolve a 20 us call);
///   - inputs rotate over copies whose total exceeds twice the last-level cache (CPU: the LLC
///     from sysfs; GPU: kDeviceRotationBytes), so no sample reads inputs a previous call left
///     in cache — a kernel-bump comparison must not depend on which build warmed the cache;
///   - the report keeps every sample; the median is the figure, the relative interquartile
///     range (q3 - q1) / median the spread that `report diff` treats as noise.
/// CPU kernels are timed with std::chrono::steady_clock around Kernel::run. Device kernels with
/// a device side (Kernel::device(), kernels/device_entry.hpp) are timed with device events around
/// its launches on inputs uploaded once; device kernels without one are reported as not timed
/// (their run() includes host<->device copies).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace attest::conformance {

/// Bytes the rotation set of a device-timed case must exceed: larger than the L2 of every
/// supported device (H100/H200 50 MiB; MI300X/MI355X 4 MiB L2 but 256 MiB Infinity Cache).
inline constexpr std::size_t kDeviceRotationBytes = std::size_t{512} << 20;

/// One named model shape: a problem string and where its numbers come from.
struct ModelShape {
  std::string name;     ///< e.g. "wan2.1-14b-720p-self"
  std::string problem;  ///< problem string (core/problem.hpp)
};

/// datasets/shapes/<name>.shapes: one `<name> <problem>` per line, `#` starts a comment.
/// `load` takes a built-in set name (wan, hunyuanvideo, flux, ltx, qwen-image, dit: all five,
/// cpu-small) or a file path; throws attest::Error naming the file, line and defect.
std::vector<ModelShape> load_shapes(const std::string& name_or_path);
std::vector<ModelShape> parse_shapes(const std::string& text, const std::string& origin);
/// Names of the built-in shape sets.
std::vector<std::string> builtin_shape_sets();

struct BenchOptions {
  std::string kernel;  ///< glob; "" = every non-mutant kernel (a glob matching mutants alone, "mutant*", selects them)
  std::string recipe;  ///< glob over each kernel's recipe labels; "" = all
  std::vector<ModelShape> shapes;
  std::string dist = "normal";
  std::uint64_t seed = 1;
  int repeat = 10;
  int warmup = 2;
  double min_sample_ms = 2.0;
  double max_gflop = 0;  ///< skip cases above this many GFLOP per call (0 = no limit)
  bool with_preprocessing = false;  ///< also time the recipe's Q/K/V quantizers (GB/s)
  bool graph = false;               ///< device kernels: also time graph replay (not implemented yet: reported as not timed)
  /// Called after each row (progress); serialised.
  std::function<void(const nlohmann::json& row, std::size_t done, std::size_t total)> on_row;
};

/// Sorted-sample statistics of a row (ms).
struct SampleStats {
  double median = 0, min = 0, max = 0, q1 = 0, q3 = 0;
  [[nodiscard]] double spread() const { return median > 0 ? (q3 - q1) / median : 0; }
};
/// Median and quartiles by linear interpolation between order statistics; throws on no samples.
SampleStats sample_stats(std::vector<double> samples);

/// Bytes the rotation set of a host-timed case must exceed: twice the largest cache level
/// reported by sysfs (32 MiB when none is readable).
std::size_t host_rotation_bytes();
/// Number of input copies for a case whose one input set is `set_bytes`: enough that all copies
/// together exceed `target`, at least 1, at most 64.
int rotation_copies(std::size_t set_bytes, std::size_t target);

/// Runs the benchmark; the report JSON (kind "bench"). Throws attest::Error on bad input
/// (unknown kernel glob matching nothing, bad problem string, bad distribution).
nlohmann::json run_bench(const BenchOptions& opt);

/// Markdown: an mha_v4-style table (kernel, Q/K, V, O formats, TFLOP/s) per shape, a per model
/// shape table (rows: shapes, columns: kernel/recipe), and the quantizer table (GB/s).
std::string bench_markdown(const nlohmann::json& report);

}  // namespace attest::conformance

#pragma once
/// Captures: the tensors a real attention call saw and produced, checked offline with the gate's
/// accuracy rule (docs/capture.md). A capture is one .safetensors file, or a directory holding
/// <name>.npy per tensor plus an optional metadata.json (an object of strings).
///
/// Tensor names (anything else is refused, so a typo cannot drop a tensor silently):
///   q, k, v, out              required; float (F64 F32 F16 BF16 F8_E4M3 F8_E5M2); layout bshd
///                             q [B,S,H,D] k [B,T,Hkv,D] v [B,T,Hkv,Dv] out [B,S,H,Dv], or bhsd
///                             [B,H,S,D] ...; ragged (cu_seqlens given): [total,H,D] or [1,total,H,D]
///   lse                       optional, natural log, F32/F64: [B,H,S'] with S' >= S (padded rows
///                             ignored) or ragged [H,total_q] / [1,H,total_q]
///   cu_seqlens_q, cu_seqlens_k  optional together, I32/I64 [B+1] (FlashAttention varlen)
///   q_codes, k_codes, v_codes   optional: the kernel's quantized operands, laid out like q/k/v
///   q_scales, k_scales, v_scales  (with their codes): the scales, row-major in the reference
///                             quantizer's order [B,H,groups...] (attest/reference/quantize.hpp)
///   k_mean                    optional: the K smoothing mean the kernel subtracted [B,H,1,D]
/// Metadata (`__metadata__` of the safetensors file, or metadata.json): recipe, layout (bshd|bhsd),
/// mask (none|causal_tl|causal_br), scale (a decimal number), framework, kernel; other keys are
/// kept and reported. Options given to check_capture override the metadata; defaults: layout
/// bshd, mask none, scale 1/sqrt(D), recipe from q's dtype (bf16, fp16, f32).
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attest/conformance/tolerance.hpp"
#include "attest/conformance/verdict.hpp"
#include "attest/datasets/safetensors.hpp"

namespace attest::conformance {

struct Capture {
  std::string source;  ///< the file or directory it was read from (named in every error)
  std::vector<datasets::NamedTensor> tensors;
  std::map<std::string, std::string> metadata;
};

/// Reads a .safetensors file or an npy capture directory; throws attest::Error "SOURCE: defect".
Capture read_capture(const std::filesystem::path& path);
/// True for a .safetensors file or a directory holding q.npy.
bool is_capture(const std::filesystem::path& path);
/// A capture itself, or the captures inside a directory (*.safetensors files and npy capture
/// subdirectories, sorted by name). Throws attest::Error when there is none.
std::vector<std::filesystem::path> find_captures(const std::filesystem::path& path);
/// Writes a capture as safetensors (tests, tools); metadata as given.
void write_capture(OutputFiles& out, const std::filesystem::path& path, const Capture& c);

struct CaptureOptions {
  std::optional<std::string> recipe, layout, mask;
  std::optional<double> scale;
  const ToleranceTable* tolerances = nullptr;  ///< nullptr: built-in table
};

struct CaptureResult {
  std::string source, framework, kernel, problem, recipe;  ///< problem and recipe as strings
  Outcome accuracy;                  ///< the gate's accuracy verdict (out and, if captured, LSE)
  std::optional<Outcome> quantized;  ///< captured codes/scales vs the reference quantizer, bitwise
  std::map<std::string, std::string> metadata;
  std::string worst_metric;  ///< the bounded metric closest to (or farthest past) its bound
  double worst_ratio = 0;    ///< measured / bound of that metric (> 1 fails)
  double seconds = 0;

  /// The worst of accuracy and quantized (failed > mistrusted > passed).
  [[nodiscard]] Verdict verdict() const;
  [[nodiscard]] std::string reason() const;
};

/// Interprets and checks one capture: FP64 reference, recipe emulation and its K/V-reversed
/// twin, the gate's accuracy judgement. Throws attest::Error "SOURCE: defect" when the capture
/// is malformed (missing tensor, inconsistent shapes, bad dtype or metadata).
CaptureResult check_capture(const Capture& c, const CaptureOptions& opt = {});

nlohmann::json to_json(const CaptureResult& r);
/// Text for one capture: every bounded metric with measured, budget, floor, bound.
std::string capture_dump(const CaptureResult& r);

/// A capture that could not be read (exit 2) in a directory run.
struct CaptureError {
  std::string source, message;
};
/// Markdown and plain-text summary: a table (capture, problem, recipe, verdict, rel_l2 and
/// max_abs measured / bound, worst metric ratio), then the `worst` captures by ratio and the
/// malformed ones.
std::string capture_markdown(const std::vector<CaptureResult>& results, const std::vector<CaptureError>& errors,
                             std::size_t worst = 5);
nlohmann::json capture_json(const std::vector<CaptureResult>& results, const std::vector<CaptureError>& errors);

}  // namespace attest::conformance

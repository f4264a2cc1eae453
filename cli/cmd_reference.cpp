// `attest reference`: the FP64 / FP32 / multiprecision reference attention on .npy inputs
// (reference/attention.hpp), writing the output and the LSE as .npy.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "attest/core/output_files.hpp"
#include "attest/core/problem.hpp"
#include "attest/core/status.hpp"
#include "attest/core/tensor.hpp"
#include "attest/datasets/npy.hpp"
#include "attest/reference/attention.hpp"
#include "commands.hpp"

namespace attest::cli {
namespace {

struct ReferenceOptions {
  std::string q, k, v, out, lse;
  std::optional<double> scale;
  std::string mask = "none", layout = "bshd", precision = "fp64", algorithm = "online";
};

// A file's tensor in logical [B, tokens, heads, dim] order.
Tensor load(const std::string& path, Layout layout, const char* what) {
  const Tensor t = datasets::read_npy(path);
  if (t.rank() != 4)
    throw Error(path + ": " + what + " must have rank 4 (" + (layout == Layout::bhsd ? "[B,H,S,D]" : "[B,S,H,D]") +
                "), got shape " + shape_string(t.shape()));
  return layout == Layout::bhsd ? t.permute({0, 2, 1, 3}) : t;
}

Tensor to_f64(const Tensor& t) {
  if (t.dtype() == DType::f64) return t;
  Tensor out(DType::f64, t.shape());
  const Tensor c = t.contiguous();
  for (std::int64_t i = 0; i < c.numel(); ++i) out.data<double>()[i] = c.data<float>()[i];
  return out;
}

void run_reference(const ReferenceOptions& o) {
  const Layout layout = parse_layout(o.layout);
  if (layout != Layout::bshd && layout != Layout::bhsd)
    throw Error("reference: layout '" + o.layout + "' is not a file layout (valid: bshd, bhsd)");
  const Mask mask = parse_mask(o.mask);
  const ref::Precision precision = ref::parse_precision(o.precision);
  const ref::Algorithm algorithm = ref::parse_algorithm(o.algorithm);

  const Tensor q = load(o.q, layout, "q"), k = load(o.k, layout, "k"), v = load(o.v, layout, "v");
  Problem p;
  set_sizes_bshd(p, q.shape(), k.shape(), v.shape());
  p.mask = mask;
  p.layout = layout;
  p.softmax_scale = o.scale;
  p.dtype = q.dtype();
  try {
    ref::check_attention_inputs(p, q, k, v);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + (layout == Layout::bhsd ? " (shapes in logical [B,S,H,D] order)" : ""));
  }

  const auto t0 = std::chrono::steady_clock::now();
  const ref::AttentionOutput r = ref::attention(p, q, k, v, precision, algorithm);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const Tensor out = layout == Layout::bhsd ? r.out.permute({0, 2, 1, 3}) : r.out;
  const Tensor lse = to_f64(r.lse);
  OutputFiles files;
  datasets::write_npy(files, o.out, out);
  if (!o.lse.empty()) datasets::write_npy(files, o.lse, lse);
  files.commit();

  double max_out = 0;
  std::int64_t nan_out = 0;
  const Tensor out64 = to_f64(r.out);  // r.out is contiguous
  for (std::int64_t i = 0; i < out64.numel(); ++i) {
    const double x = out64.data<double>()[i];
    if (std::isnan(x)) ++nan_out;
    else max_out = std::max(max_out, std::abs(x));
  }
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  std::int64_t masked = 0, nan_lse = 0;
  for (std::int64_t i = 0; i < lse.numel(); ++i) {
    const double x = lse.data<double>()[i];
    if (std::isnan(x)) ++nan_lse;
    else if (x == -std::numeric_limits<double>::infinity()) ++masked;
    else lo = std::min(lo, x), hi = std::max(hi, x);
  }
  const std::string file_order = layout == Layout::bhsd ? "[B,H,S,Dv]" : "[B,S,H,Dv]";
  std::printf("| reference attention | |\n|---|---|\n");
  std::printf("| problem | `%s` |\n", to_string(p).c_str());
  std::printf("| inputs | q %s, k %s, v %s (%s, %s) |\n", shape_string(q.shape()).c_str(), shape_string(k.shape()).c_str(),
              shape_string(v.shape()).c_str(), std::string(dtype_name(q.dtype())).c_str(),
              layout == Layout::bhsd ? "bhsd files, shapes shown as bshd" : "bshd");
  std::printf("| precision | %s, %s |\n", std::string(ref::precision_name(precision)).c_str(),
              std::string(ref::algorithm_name(algorithm)).c_str());
  std::printf("| scale | %.17g |\n| mask | %s |\n", p.scale(), std::string(mask_name(mask)).c_str());
  std::printf("| max abs out | %.6g%s |\n", max_out, nan_out ? (" (" + std::to_string(nan_out) + " NaN)").c_str() : "");
  if (lo <= hi) std::printf("| lse range | [%.6g, %.6g]", lo, hi);
  else std::printf("| lse range | none finite");
  if (masked) std::printf(", %lld fully-masked rows (-inf)", static_cast<long long>(masked));
  if (nan_lse) std::printf(", %lld NaN rows", static_cast<long long>(nan_lse));
  std::printf(" |\n| time | %.3f s |\n", seconds);
  std::printf("| wrote | %s %s %s%s |\n", o.out.c_str(), file_order.c_str(), std::string(dtype_name(out.dtype())).c_str(),
              o.lse.empty() ? "" : (", " + o.lse + " [B,H,S] f64").c_str());
  set_exit(0);
}

}  // namespace

static void add_reference_command(CLI::App& app) {
  auto opts = std::make_shared<ReferenceOptions>();
  auto* cmd = app.add_subcommand(
      "reference",
      "Reference attention out = softmax(scale * Q K^T + mask) V and its LSE (natural log), in FP64, FP32 or\n"
      "50-digit multiprecision. Inputs are float32 or float64 .npy. bshd: Q [B,S,H,D], K [B,T,Hk,D],\n"
      "V [B,T,Hk,Dv]; bhsd: Q [B,H,S,D], K [B,Hk,T,D], V [B,Hk,T,Dv]. H must be a multiple of Hk (GQA: head h\n"
      "reads KV head h / (H/Hk)). Output in the input layout, float64 (float32 for --precision fp32);\n"
      "LSE [B,H,S] float64. Fully-masked rows give 0 and -inf. Nothing is written on error (exit 2).");
  cmd->add_option("--q", opts->q, "Q.npy")->required();
  cmd->add_option("--k", opts->k, "K.npy")->required();
  cmd->add_option("--v", opts->v, "V.npy")->required();
  cmd->add_option("--out", opts->out, "output .npy")->required();
  cmd->add_option("--lse", opts->lse, "LSE .npy, [B,H,S] float64 (optional)");
  cmd->add_option("--scale", opts->scale, "softmax scale (default 1/sqrt(D))");
  cmd->add_option("--mask", opts->mask,
                  "none, causal_tl (key j visible iff j <= i) or causal_br (j <= i + T - S, FlashAttention >= 2.1)")
      ->capture_default_str();
  cmd->add_option("--layout", opts->layout, "bshd or bhsd (of every file)")->capture_default_str();
  cmd->add_option("--precision", opts->precision,
                  "fp64, fp32 or mp50 (Boost cpp_bin_float_50, rounded to float64 at the end; slow)")
      ->capture_default_str();
  cmd->add_option("--algorithm", opts->algorithm,
                  "online (tiled, running max) or direct (materialised logits); they agree to rounding")
      ->capture_default_str();
  cmd->callback([opts] { run_reference(*opts); });
}

ATTEST_REGISTER_COMMAND(10, add_reference_command);

}  // namespace attest::cli

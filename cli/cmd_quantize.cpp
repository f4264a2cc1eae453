// `attest quantize` / `attest dequantize`: the reference quantizers on .npy files
// (docs/quantizer-schemes.md describes schemes, shapes and dtypes).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "attest/core/output_files.hpp"
#include "attest/core/status.hpp"
#include "attest/datasets/npy.hpp"
#include "attest/reference/quantize.hpp"
#include "commands.hpp"

namespace attest::cli {
namespace {

struct QuantizeOptions {
  std::string scheme, in, codes, scales, out, mean_in, mean_out;
  int axis = -2;
  double sm_scale = 0;  // 0: 1/sqrt(channels)
};

// The permutation that moves the token axis to position rank-2 (channels stay last, the other
// axes keep their order), and its inverse.
std::vector<int> to_canonical(int rank, int axis_opt) {
  if (rank < 2) throw Error("input of rank " + std::to_string(rank) + ": need [..., tokens, channels]");
  const int axis = axis_opt < 0 ? axis_opt + rank : axis_opt;
  if (axis < 0 || axis >= rank) throw Error("--axis " + std::to_string(axis_opt) + " is out of range for rank " + std::to_string(rank));
  if (axis == rank - 1) throw Error("--axis " + std::to_string(axis_opt) + " is the channel axis (the last axis); pick the token axis");
  std::vector<int> perm;
  for (int d = 0; d < rank - 1; ++d)
    if (d != axis) perm.push_back(d);
  perm.push_back(axis);
  perm.push_back(rank - 1);
  return perm;
}

std::vector<int> inverse(const std::vector<int>& p) {
  std::vector<int> inv(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) inv[static_cast<std::size_t>(p[i])] = static_cast<int>(i);
  return inv;
}

void run_quantize(const QuantizeOptions& o) {
  const Scheme s = parse_scheme(o.scheme);
  ref::require_quantizer(s);
  const Tensor x = datasets::read_npy(o.in);
  if (x.dtype() != DType::f32) throw Error(o.in + ": dtype " + std::string(dtype_name(x.dtype())) + ", need f32");
  const std::vector<int> perm = to_canonical(x.rank(), o.axis);
  const Tensor xc = x.permute(perm);
  ref::QuantInputs in;
  in.sm_scale = o.sm_scale > 0 ? o.sm_scale : 1.0 / std::sqrt(static_cast<double>(x.shape().back()));
  Tensor mean;
  if (!o.mean_in.empty()) {
    mean = datasets::read_npy(o.mean_in);
    in.mean = &mean;
  }
  const ref::Quantized q = ref::quantize(xc, s, in);
  OutputFiles out;
  datasets::write_npy(out, o.codes, q.codes.permute(inverse(perm)).contiguous());
  datasets::write_npy(out, o.scales, q.scales);
  if (!o.mean_out.empty()) {
    if (q.mean.empty()) throw Error("--mean-out: scheme '" + o.scheme + "' has no smoothing");
    datasets::write_npy(out, o.mean_out, q.mean);
  }
  out.commit();
  std::printf("%s %s codes %s %s scales %s %s\n", attest::to_string(s).c_str(), shape_string(x.shape()).c_str(),
              std::string(dtype_name(q.codes.dtype())).c_str(), o.codes.c_str(), shape_string(q.scales.shape()).c_str(),
              o.scales.c_str());
  set_exit(0);
}

void run_dequantize(const QuantizeOptions& o) {
  const Scheme s = parse_scheme(o.scheme);
  ref::require_quantizer(s);
  const Tensor codes = datasets::read_npy(o.codes);
  const Tensor scales = datasets::read_npy(o.scales);
  const std::vector<int> perm = to_canonical(codes.rank(), o.axis);
  const Tensor x = ref::dequantize(codes.permute(perm), scales, s);
  OutputFiles out;
  datasets::write_npy(out, o.out, x.permute(inverse(perm)).contiguous());
  out.commit();
  std::printf("%s %s f32 %s\n", attest::to_string(s).c_str(), shape_string(codes.shape()).c_str(), o.out.c_str());
  set_exit(0);
}

}  // namespace

static void add_quantize_commands(CLI::App& app) {
  const std::string scheme_help =
      "Quantizer scheme, e.g. int8:per_block=64:round=half, fp8_e4m3fn:per_channel, mxfp4_e2m1fn:scale=rceil "
      "(grammar: docs/quantizer-schemes.md)";
  const std::string axis_help = "Token axis of the input (default -2); the last axis is always channels";
  {
    auto o = std::make_shared<QuantizeOptions>();
    auto* cmd = app.add_subcommand("quantize", "Quantize an f32 .npy [..., tokens, channels] with a reference quantizer");
    cmd->add_option("--scheme", o->scheme, scheme_help)->required();
    cmd->add_option("--in", o->in, "Input .npy, f32")->required();
    cmd->add_option("--codes", o->codes, "Output codes .npy, same shape as the input: i8 (int8, mxint8), u8 (fp8 and "
                                         "MX element codes, unpacked), u2 (bf16/fp16 casts)")->required();
    cmd->add_option("--scales", o->scales, "Output scales .npy: f32, or u8 E8M0 codes for MX; shape [others..., "
                                           "token groups, channel groups] (see the docs)")->required();
    cmd->add_option("--axis", o->axis, axis_help);
    cmd->add_option("--sm-scale", o->sm_scale, "softmax scale for prescale=sm_log2e (default 1/sqrt(channels))");
    cmd->add_option("--k-mean", o->mean_in, "Smoothing mean .npy f32 [others..., 1, channels] (default: computed)");
    cmd->add_option("--mean-out", o->mean_out, "Write the smoothing mean used to this .npy");
    cmd->callback([o] { run_quantize(*o); });
  }
  {
    auto o = std::make_shared<QuantizeOptions>();
    auto* cmd = app.add_subcommand("dequantize", "Values of codes + scales written by `attest quantize`, as f32 .npy");
    cmd->add_option("--scheme", o->scheme, scheme_help)->required();
    cmd->add_option("--codes", o->codes, "Codes .npy from `attest quantize`")->required();
    cmd->add_option("--scales", o->scales, "Scales .npy from `attest quantize`")->required();
    cmd->add_option("--out", o->out, "Output .npy, f32, the codes' shape")->required();
    cmd->add_option("--axis", o->axis, axis_help);
    cmd->callback([o] { run_dequantize(*o); });
  }
}

ATTEST_REGISTER_COMMAND(80, add_quantize_commands);

}  // namespace attest::cli

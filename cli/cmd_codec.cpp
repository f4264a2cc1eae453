// `attest codec`: element format encode (float32/float64 .npy -> codes) and decode (codes ->
// float32 .npy) with the bit-exact reference codecs (reference/formats.hpp).
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "attest/core/output_files.hpp"
#include "attest/core/status.hpp"
#include "attest/core/tensor.hpp"
#include "attest/datasets/npy.hpp"
#include "attest/reference/formats.hpp"
#include "commands.hpp"

namespace attest::cli {
namespace {

struct CodecOptions {
  std::string format, overflow = "ieee", round = "rne";
  std::vector<std::string> encode, decode;
};

// One code per element: uint8 for formats of 8 bits or fewer, uint16 for bf16 and fp16.
Tensor encode_tensor(attest::FormatId f, const Tensor& in, ref::Rounding r, ref::Overflow o) {
  const Tensor x = in.contiguous();
  const bool wide = ref::format_info(f).bits > 8;
  Tensor out(wide ? DType::u16 : DType::u8, x.shape());
  const auto n = static_cast<std::size_t>(x.numel());
  if (x.dtype() == DType::f32) {
    const std::span<const float> src(x.data<float>(), n);
    if (wide) ref::encode_f32(f, src, std::span<std::uint16_t>(out.data<std::uint16_t>(), n), r, o);
    else ref::encode_f32(f, src, std::span<std::uint8_t>(out.data<std::uint8_t>(), n), r, o);
  } else if (x.dtype() == DType::f64) {
    const double* src = x.data<double>();
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint16_t c = ref::encode(f, src[i], r, o);
      if (wide) out.data<std::uint16_t>()[i] = c;
      else out.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(c);
    }
  } else {
    throw Error("encode input has dtype " + std::string(dtype_name(x.dtype())) + " (valid: f32, f64)");
  }
  return out;
}

Tensor decode_tensor(attest::FormatId f, const Tensor& in) {
  const Tensor c = in.contiguous();
  Tensor out(DType::f32, c.shape());
  const auto n = static_cast<std::size_t>(c.numel());
  const std::uint32_t count = ref::code_count(f);
  auto put = [&](std::size_t i, std::uint32_t code) {
    if (code >= count)
      throw Error("decode input: code " + std::to_string(code) + " at index " + std::to_string(i) + " does not fit " +
                  std::string(ref::format_name(f)) + " (" + std::to_string(ref::format_info(f).bits) + " bits)");
    out.data<float>()[i] = ref::decode(f, static_cast<std::uint16_t>(code));
  };
  switch (c.dtype()) {
    case DType::u8: for (std::size_t i = 0; i < n; ++i) put(i, c.data<std::uint8_t>()[i]); break;
    case DType::i8:  // int8 codes may come as signed bytes
      for (std::size_t i = 0; i < n; ++i) put(i, static_cast<std::uint8_t>(c.data<std::int8_t>()[i]));
      break;
    case DType::u16: for (std::size_t i = 0; i < n; ++i) put(i, c.data<std::uint16_t>()[i]); break;
    default: throw Error("decode input has dtype " + std::string(dtype_name(c.dtype())) + " (valid: u8, i8, u16)");
  }
  return out;
}

void run_codec(const CodecOptions& o) {
  const attest::FormatId f = ref::parse_format(o.format);
  const ref::Rounding r = attest::parse_rounding(o.round);
  const ref::Overflow ov = attest::parse_overflow(o.overflow);
  const bool enc = !o.encode.empty();
  if (enc == !o.decode.empty()) throw Error("give exactly one of --encode IN OUT or --decode IN OUT");
  const std::vector<std::string>& io = enc ? o.encode : o.decode;
  const Tensor in = datasets::read_npy(io[0]);
  const Tensor result = enc ? encode_tensor(f, in, r, ov) : decode_tensor(f, in);
  OutputFiles out;
  datasets::write_npy(out, io[1], result);
  out.commit();
  std::printf("%s %s %s %s\n", io[1].c_str(), shape_string(result.shape()).c_str(),
              std::string(dtype_name(result.dtype())).c_str(), std::string(ref::format_name(f)).c_str());
  set_exit(0);
}

}  // namespace

static void add_codec_command(CLI::App& app) {
  auto opts = std::make_shared<CodecOptions>();
  std::string names;
  for (auto f : ref::all_formats()) names += (names.empty() ? "" : ", ") + std::string(ref::format_name(f));
  auto* cmd = app.add_subcommand("codec", "Encode float .npy to element format codes, or decode codes to float32");
  cmd->add_option("--format", opts->format, "Element format: " + names)->required();
  cmd->add_option("--overflow", opts->overflow, "Overflow/Inf/NaN rule: ieee, sat_cuda, sat_hip")->capture_default_str();
  cmd->add_option("--round", opts->round, "Tie rule: rne, away, smaller")->capture_default_str();
  auto* e = cmd->add_option("--encode", opts->encode,
                            "IN.npy (float32, or float64 rounded once) OUT.npy (uint8 codes; uint16 for bf16/fp16)")
                ->expected(2);
  auto* d = cmd->add_option("--decode", opts->decode, "IN.npy (u8/i8/u16 codes) OUT.npy (float32)")->expected(2);
  e->excludes(d);
  cmd->callback([opts] { run_codec(*opts); });
}

ATTEST_REGISTER_COMMAND(30, add_codec_command);

}  // namespace attest::cli

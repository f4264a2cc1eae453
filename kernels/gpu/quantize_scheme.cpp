// The device quantizers' reading of scheme strings (docs/quantizer-schemes.md). kernels/ never
// includes reference/, so this is the device side's own small parser of the same grammar,
// producing the plain-data qm::Scheme the kernels take.
#include <array>
#include <charconv>
#include <string>
#include <utility>
#include <vector>

#include "attest/core/status.hpp"
#include "attest/kernels/gpu/quantize.hpp"

namespace attest::gpu {
namespace {

using namespace qm;

template <class E, std::size_t N>
E pick(const std::array<std::pair<std::string_view, E>, N>& t, std::string_view v, const std::string& text,
       std::string_view what) {
  std::string valid;
  for (const auto& [n, e] : t) {
    if (n == v) return e;
    valid += (valid.empty() ? "" : ", ") + std::string(n);
  }
  throw Error("scheme '" + text + "': unknown " + std::string(what) + " '" + std::string(v) + "' (valid: " + valid + ")");
}

struct Head {
  std::string_view name;
  Fam fam;
  Fmt elem;
};
constexpr std::array<Head, 13> kHeads{{
    {"bf16", Fam::cast, Fmt::bf16},
    {"fp16", Fam::cast, Fmt::fp16},
    {"int8", Fam::int8, Fmt::int8},
    {"fp8_e4m3fn", Fam::fp8, Fmt::e4m3fn},
    {"fp8_e5m2", Fam::fp8, Fmt::e5m2},
    {"fp8_e4m3fnuz", Fam::fp8, Fmt::e4m3fnuz},
    {"fp8_e5m2fnuz", Fam::fp8, Fmt::e5m2fnuz},
    {"mxfp8_e4m3fn", Fam::mx, Fmt::e4m3fn},
    {"mxfp8_e5m2", Fam::mx, Fmt::e5m2},
    {"mxfp6_e2m3fn", Fam::mx, Fmt::e2m3},
    {"mxfp6_e3m2fn", Fam::mx, Fmt::e3m2},
    {"mxfp4_e2m1fn", Fam::mx, Fmt::e2m1},
    {"mxint8", Fam::mx, Fmt::int8},
}};

std::int64_t positive(std::string_view v, const std::string& text) {
  std::int64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size() || n < 1)
    throw Error("scheme '" + text + "': '" + std::string(v) + "' is not a positive integer");
  return n;
}

}  // namespace

DeviceScheme parse_device_scheme(std::string_view text_in) {
  const std::string text(text_in);
  std::vector<std::string_view> items;
  for (std::string_view rest = text_in;;) {
    const auto c = rest.find(':');
    items.push_back(rest.substr(0, c));
    if (c == std::string_view::npos) break;
    rest.remove_prefix(c + 1);
  }
  Scheme s;
  std::string heads;
  bool found = false;
  for (const auto& h : kHeads) {
    heads += (heads.empty() ? "" : ", ") + std::string(h.name);
    if (h.name != items[0]) continue;
    found = true;
    s.fam = h.fam;
    s.elem = h.elem;
  }
  if (!found) throw Error("unknown quantizer scheme '" + std::string(items[0]) + "' (valid heads: " + heads + ")");
  // Defaults per family (docs/quantizer-schemes.md "Keys").
  s.ovf = s.fam == Fam::cast ? Ovf::ieee : Ovf::sat_cuda;
  if (s.fam == Fam::fp8) {
    s.apply_mul = true;
    s.qmax = ffrom(fmt_info(s.elem).max_bits);
  }
  if (s.fam == Fam::mx) s.block = 32;
  const bool grouped = s.fam == Fam::int8 || s.fam == Fam::fp8;
  bool have_gran = false, sm90 = false;
  std::vector<std::string_view> seen;
  using G = Gran;
  constexpr std::array<std::pair<std::string_view, G>, 6> kGran{{{"per_tensor", G::tensor}, {"per_block", G::block},
      {"per_warp", G::warp}, {"per_thread", G::thread}, {"per_token", G::token}, {"per_channel", G::channel}}};
  for (std::size_t i = 1; i < items.size(); ++i) {
    const auto eq = items[i].find('=');
    const std::string_view key = items[i].substr(0, eq);
    const std::string_view val = eq == std::string_view::npos ? std::string_view{} : items[i].substr(eq + 1);
    bool is_gran = false;
    for (const auto& [n, g] : kGran)
      if (n == key) {
        is_gran = true;
        if (!grouped) throw Error("scheme '" + text + "': granularity " + std::string(key) + " applies to int8 and fp8 only");
        if (have_gran) throw Error("scheme '" + text + "': more than one granularity");
        have_gran = true;
        s.gran = g;
        if (g == G::block) s.block = positive(val, text);
        if (g == G::warp || g == G::thread)
          sm90 = pick(std::array<std::pair<std::string_view, bool>, 2>{{{"sm89", false}, {"sm90", true}}}, val, text, "architecture");
      }
    if (is_gran) continue;
    for (auto k : seen)
      if (k == key) throw Error("scheme '" + text + "': duplicate key '" + std::string(key) + "'");
    seen.push_back(key);
    if (key == "role" && grouped) {
      s.role_k = pick(std::array<std::pair<std::string_view, bool>, 2>{{{"q", false}, {"k", true}}}, val, text, "role");
    } else if (key == "block" && s.fam == Fam::mx) {
      s.block = positive(val, text);
    } else if (key == "scale" && s.fam == Fam::mx) {
      s.e8 = pick(std::array<std::pair<std::string_view, E8>, 8>{{{"floor", E8::floor}, {"ceil", E8::ceil}, {"rceil", E8::rceil},
                      {"aiter_hip_fp4", E8::aiter_hip_fp4}, {"aiter_triton_v_fp4", E8::aiter_triton_v_fp4},
                      {"aiter_triton_rne", E8::aiter_triton_rne}, {"aiter_hip_fp8", E8::aiter_hip_fp8},
                      {"aiter_hip_fp6", E8::aiter_hip_fp6}}}, val, text, "E8M0 scale rule");
    } else if (key == "scale" && grouped) {
      s.rule = pick(std::array<std::pair<std::string_view, Rule>, 6>{{{"ieee", Rule::ieee}, {"rcp", Rule::rcp}, {"eps", Rule::eps},
                        {"floor", Rule::floor}, {"ieee_one", Rule::ieee_one}, {"none", Rule::none}}}, val, text, "scale rule");
    } else if (key == "scale_max" && s.fam == Fam::fp8) {
      float v = 0;
      auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), v);
      if (val.empty() || ec != std::errc() || p != val.data() + val.size() || !(v > 0) || !is_finite(v))
        throw Error("scheme '" + text + "': bad scale_max '" + std::string(val) + "' (a finite number > 0)");
      s.qmax = v;
    } else if (key == "round" && s.fam == Fam::int8) {
      s.int_half = pick(std::array<std::pair<std::string_view, bool>, 2>{{{"rne", false}, {"half", true}}}, val, text, "int8 rounding");
    } else if (key == "round") {
      s.tie = pick(std::array<std::pair<std::string_view, Tie>, 3>{{{"rne", Tie::even}, {"away", Tie::away}, {"smaller", Tie::smaller}}}, val, text, "rounding");
    } else if (key == "overflow" && s.fam != Fam::int8) {
      s.ovf = pick(std::array<std::pair<std::string_view, Ovf>, 3>{{{"ieee", Ovf::ieee}, {"sat_cuda", Ovf::sat_cuda}, {"sat_hip", Ovf::sat_hip}}}, val, text, "overflow");
    } else if (key == "apply" && grouped) {
      s.apply_mul = pick(std::array<std::pair<std::string_view, bool>, 2>{{{"div", false}, {"mul", true}}}, val, text, "apply");
    } else if (key == "smooth" && s.fam != Fam::cast) {
      s.smooth = pick(std::array<std::pair<std::string_view, Smooth>, 3>{{{"none", Smooth::none}, {"fp32", Smooth::fp32}, {"bf16", Smooth::bf16}}}, val, text, "smoothing");
    } else if (key == "prescale" && s.fam != Fam::cast) {
      s.prescale = pick(std::array<std::pair<std::string_view, bool>, 2>{{{"none", false}, {"sm_log2e", true}}}, val, text, "prescale");
    } else if (key == "rotate" && s.fam != Fam::cast) {
      s.rotate = pick(std::array<std::pair<std::string_view, Rotate>, 4>{{{"none", Rotate::none}, {"h128", Rotate::h128},
                          {"h128_bf16", Rotate::h128_bf16}, {"h32_bf16", Rotate::h32_bf16}}}, val, text, "rotation");
    } else {
      throw Error("scheme '" + text + "': key '" + std::string(key) + "' does not apply to " + std::string(items[0]) +
                  " (keys: per_tensor per_block per_warp per_thread per_token per_channel role block scale scale_max "
                  "round overflow apply smooth prescale rotate)");
    }
  }
  if (grouped && !have_gran)
    throw Error("scheme '" + text + "': int8 and fp8 need a granularity (per_tensor, per_block=N, per_warp=ARCH, "
                "per_thread=ARCH, per_token, per_channel)");
  if (s.gran == Gran::warp || s.gran == Gran::thread) s.warp_rows = sm90 ? (s.role_k ? 128 : 16) : (s.role_k ? 64 : 32);
  if (s.apply_mul && s.rule != Rule::ieee && s.rule != Rule::rcp && s.rule != Rule::floor)
    throw Error("scheme '" + text + "': apply=mul needs scale=ieee, rcp or floor");
  return DeviceScheme{text, s};
}

}  // namespace attest::gpu

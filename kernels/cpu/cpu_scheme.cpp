#include "cpu/cpu_scheme.hpp"

#include <array>
#include <charconv>
#include <utility>
#include <vector>

#include "attest/core/status.hpp"

namespace attest::kernels::cpu {
namespace {

template <class E, std::size_t N>
E pick(const std::array<std::pair<std::string_view, E>, N>& t, std::string_view v, std::string_view text,
       std::string_view what) {
  std::string valid;
  for (const auto& [n, e] : t) {
    if (n == v) return e;
    valid += (valid.empty() ? "" : ", ") + std::string(n);
  }
  throw Error("scheme '" + std::string(text) + "': unknown " + std::string(what) + " '" + std::string(v) +
              "' (valid: " + valid + ")");
}

struct Head {
  std::string_view name;
  Scheme::Kind kind;
  FloatFmt elem;
};
constexpr std::array<Head, 14> kHeads{{
    {"f32", Scheme::Kind::f32, kBf16},
    {"bf16", Scheme::Kind::cast, kBf16},
    {"fp16", Scheme::Kind::cast, kFp16},
    {"int8", Scheme::Kind::int8, kBf16},
    {"fp8_e4m3fn", Scheme::Kind::fp8, kE4m3},
    {"fp8_e5m2", Scheme::Kind::fp8, kE5m2},
    {"fp8_e4m3fnuz", Scheme::Kind::fp8, kE4m3fnuz},
    {"fp8_e5m2fnuz", Scheme::Kind::fp8, kE5m2fnuz},
    {"mxfp8_e4m3fn", Scheme::Kind::mx, kE4m3},
    {"mxfp8_e5m2", Scheme::Kind::mx, kE5m2},
    {"mxfp6_e2m3fn", Scheme::Kind::mx, kE2m3},
    {"mxfp6_e3m2fn", Scheme::Kind::mx, kE3m2},
    {"mxfp4_e2m1fn", Scheme::Kind::mx, kE2m1},
    {"mxint8", Scheme::Kind::mx, kBf16},
}};

std::int64_t count(std::string_view v, std::string_view text) {
  std::int64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size() || n < 1)
    throw Error("scheme '" + std::string(text) + "': '" + std::string(v) + "' is not a positive integer");
  return n;
}

}  // namespace

Scheme parse_scheme(std::string_view text) {
  std::vector<std::string_view> items;
  for (std::string_view rest = text;;) {
    const auto c = rest.find(':');
    items.push_back(rest.substr(0, c));
    if (c == std::string_view::npos) break;
    rest.remove_prefix(c + 1);
  }
  Scheme s;
  bool found = false;
  std::string heads;
  for (const auto& h : kHeads) {
    heads += (heads.empty() ? "" : ", ") + std::string(h.name);
    if (h.name != items[0]) continue;
    found = true;
    s.kind = h.kind;
    s.elem = h.elem;
  }
  if (!found) throw Error("unknown quantizer scheme '" + std::string(items[0]) + "' (valid heads: " + heads + ")");
  s.head = std::string(items[0]);
  s.mx_int8 = s.head == "mxint8";
  if (s.kind == Scheme::Kind::fp8) {
    s.apply_mul = true;
    s.scale_max = static_cast<float>(s.elem.max);
  }
  if (s.kind == Scheme::Kind::fp8 || s.kind == Scheme::Kind::mx) s.sat = Sat::satfinite;
  if (s.kind == Scheme::Kind::mx) s.block = 32;
  if (s.kind == Scheme::Kind::f32 && items.size() > 1)
    throw Error("scheme '" + std::string(text) + "': f32 takes no options");
  using G = Scheme::Gran;
  constexpr std::array<std::pair<std::string_view, G>, 6> kGran{{{"per_tensor", G::tensor}, {"per_block", G::block},
      {"per_warp", G::warp}, {"per_thread", G::thread}, {"per_token", G::token}, {"per_channel", G::channel}}};
  for (std::size_t i = 1; i < items.size(); ++i) {
    const auto eq = items[i].find('=');
    const std::string_view key = items[i].substr(0, eq);
    const std::string_view val = eq == std::string_view::npos ? std::string_view{} : items[i].substr(eq + 1);
    bool gran = false;
    for (const auto& [n, g] : kGran) {
      if (n != key) continue;
      gran = true;
      s.gran = g;
      if (g == G::block) s.block = count(val, text);
      if (g == G::warp || g == G::thread) {
        s.sm90 = pick(std::array<std::pair<std::string_view, bool>, 2>{{{"sm89", false}, {"sm90", true}}}, val, text, "architecture");
      }
    }
    if (gran) continue;
    if (key == "role") {
      s.role_k = pick(std::array<std::pair<std::string_view, bool>, 2>{{{"q", false}, {"k", true}}}, val, text, "role");
    } else if (key == "block") {
      s.block = count(val, text);
    } else if (key == "scale") {
      if (s.kind == Scheme::Kind::mx) {
        s.e8m0 = std::string(val);
      } else {
        using R = Scheme::Rule;
        s.rule = pick(std::array<std::pair<std::string_view, R>, 6>{{{"ieee", R::ieee}, {"rcp", R::rcp}, {"eps", R::eps},
                          {"floor", R::floor}, {"ieee_one", R::ieee_one}, {"none", R::none}}}, val, text, "scale rule");
      }
    } else if (key == "scale_max") {
      float v = 0;
      auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), v);
      if (val.empty() || ec != std::errc() || p != val.data() + val.size())
        throw Error("scheme '" + std::string(text) + "': bad scale_max '" + std::string(val) + "'");
      s.scale_max = v;
    } else if (key == "round") {
      if (s.kind == Scheme::Kind::int8) {
        s.int_round = pick(std::array<std::pair<std::string_view, IntRound>, 2>{{{"rne", IntRound::rne}, {"half", IntRound::half}}}, val, text, "int8 rounding");
      } else {
        const int r = pick(std::array<std::pair<std::string_view, int>, 3>{{{"rne", 0}, {"away", 1}, {"smaller", 2}}}, val, text, "rounding");
        s.tie = r == 1 ? Tie::away : r == 2 ? Tie::smaller : Tie::even;
      }
    } else if (key == "overflow") {
      s.sat = pick(std::array<std::pair<std::string_view, Sat>, 3>{{{"ieee", Sat::ieee}, {"sat_cuda", Sat::satfinite}, {"sat_hip", Sat::sat_hip}}}, val, text, "overflow");
    } else if (key == "apply") {
      s.apply_mul = pick(std::array<std::pair<std::string_view, bool>, 2>{{{"div", false}, {"mul", true}}}, val, text, "apply");
    } else if (key == "smooth") {
      using S = Scheme::Smooth;
      s.smooth = pick(std::array<std::pair<std::string_view, S>, 3>{{{"none", S::none}, {"fp32", S::fp32}, {"bf16", S::bf16}}}, val, text, "smoothing");
    } else if (key == "prescale") {
      s.prescale = pick(std::array<std::pair<std::string_view, bool>, 2>{{{"none", false}, {"sm_log2e", true}}}, val, text, "prescale");
    } else if (key == "rotate") {
      using R = Scheme::Rotate;
      s.rotate = pick(std::array<std::pair<std::string_view, R>, 4>{{{"none", R::none}, {"h128", R::h128}, {"h128_bf16", R::h128_bf16}, {"h32_bf16", R::h32_bf16}}}, val, text, "rotation");
    } else {
      throw Error("scheme '" + std::string(text) + "': unknown key '" + std::string(key) +
                  "' (valid: per_tensor per_block per_warp per_thread per_token per_channel role block scale "
                  "scale_max round overflow apply smooth prescale rotate)");
    }
  }
  return s;
}

std::string unsupported_reason(const Scheme& s) {
  return {};
}

}  // namespace attest::kernels::cpu

// The quantizer scheme grammar (scheme.hpp, docs/quantizer-schemes.md): the one parser that the
// reference quantizers, kernels/cpu and kernels/gpu read schemes with.
#include "attest/core/scheme.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "attest/core/status.hpp"

namespace attest {
namespace {

using S = Scheme;

template <class E>
using Table = std::span<const std::pair<E, std::string_view>>;

template <class E>
std::string valid_list(Table<E> t) {
  std::string s;
  for (const auto& [e, n] : t) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

template <class E>
std::string_view name_of(Table<E> t, E e) {
  for (const auto& [v, n] : t)
    if (v == e) return n;
  return "?";
}

template <class E>
E lookup(Table<E> t, std::string_view s, std::string_view what, std::string_view text) {
  for (const auto& [e, n] : t)
    if (n == s) return e;
  throw Error("scheme '" + std::string(text) + "': unknown " + std::string(what) + " '" + std::string(s) +
              "' (valid: " + valid_list(t) + ")");
}

constexpr std::array<std::pair<S::Family, std::string_view>, 5> kFamily{{
    {S::Family::identity, "identity"}, {S::Family::cast, "cast"}, {S::Family::int8, "int8"},
    {S::Family::fp8, "fp8"}, {S::Family::mx, "mx"}}};
constexpr std::array<std::pair<S::Granularity, std::string_view>, 6> kGran{{
    {S::Granularity::per_tensor, "per_tensor"}, {S::Granularity::per_block, "per_block"},
    {S::Granularity::per_warp, "per_warp"}, {S::Granularity::per_thread, "per_thread"},
    {S::Granularity::per_token, "per_token"}, {S::Granularity::per_channel, "per_channel"}}};
constexpr std::array<std::pair<S::SageArch, std::string_view>, 2> kArch{{{S::SageArch::sm89, "sm89"}, {S::SageArch::sm90, "sm90"}}};
constexpr std::array<std::pair<S::Role, std::string_view>, 2> kRole{{{S::Role::q, "q"}, {S::Role::k, "k"}}};
constexpr std::array<std::pair<S::ScaleRule, std::string_view>, 6> kScale{{
    {S::ScaleRule::ieee, "ieee"}, {S::ScaleRule::rcp, "rcp"}, {S::ScaleRule::eps, "eps"},
    {S::ScaleRule::floor, "floor"}, {S::ScaleRule::ieee_one, "ieee_one"}, {S::ScaleRule::none, "none"}}};
constexpr std::array<std::pair<S::E8M0Rule, std::string_view>, 8> kE8m0{{
    {S::E8M0Rule::floor, "floor"}, {S::E8M0Rule::ceil, "ceil"}, {S::E8M0Rule::rceil, "rceil"},
    {S::E8M0Rule::aiter_hip_fp4, "aiter_hip_fp4"}, {S::E8M0Rule::aiter_triton_v_fp4, "aiter_triton_v_fp4"},
    {S::E8M0Rule::aiter_triton_rne, "aiter_triton_rne"}, {S::E8M0Rule::aiter_hip_fp8, "aiter_hip_fp8"},
    {S::E8M0Rule::aiter_hip_fp6, "aiter_hip_fp6"}}};
constexpr std::array<std::pair<S::IntRounding, std::string_view>, 2> kIntRound{{{S::IntRounding::rne, "rne"}, {S::IntRounding::half, "half"}}};
constexpr std::array<std::pair<S::Rounding, std::string_view>, 3> kElemRound{{
    {S::Rounding::rne, "rne"}, {S::Rounding::away, "away"}, {S::Rounding::smaller, "smaller"}}};
constexpr std::array<std::pair<S::Overflow, std::string_view>, 3> kOverflow{{
    {S::Overflow::ieee, "ieee"}, {S::Overflow::sat_cuda, "sat_cuda"}, {S::Overflow::sat_hip, "sat_hip"}}};
constexpr std::array<std::pair<S::ApplyOp, std::string_view>, 2> kApply{{{S::ApplyOp::div, "div"}, {S::ApplyOp::mul, "mul"}}};
constexpr std::array<std::pair<S::Smoothing, std::string_view>, 3> kSmooth{{
    {S::Smoothing::none, "none"}, {S::Smoothing::fp32, "fp32"}, {S::Smoothing::bf16, "bf16"}}};
constexpr std::array<std::pair<S::Prescale, std::string_view>, 2> kPrescale{{{S::Prescale::none, "none"}, {S::Prescale::sm_log2e, "sm_log2e"}}};
constexpr std::array<std::pair<S::Rotation, std::string_view>, 4> kRotate{{
    {S::Rotation::none, "none"}, {S::Rotation::h128, "h128"}, {S::Rotation::h128_bf16, "h128_bf16"},
    {S::Rotation::h32_bf16, "h32_bf16"}}};

struct Head {
  std::string_view name;
  S::Family family;
  FormatId element;
};
// Error messages list the heads in this order (f32 last: it was added after the others).
constexpr std::array<Head, 14> kHeads{{
    {"bf16", S::Family::cast, FormatId::bf16},
    {"fp16", S::Family::cast, FormatId::fp16},
    {"int8", S::Family::int8, FormatId::int8},
    {"fp8_e4m3fn", S::Family::fp8, FormatId::fp8_e4m3fn},
    {"fp8_e5m2", S::Family::fp8, FormatId::fp8_e5m2},
    {"fp8_e4m3fnuz", S::Family::fp8, FormatId::fp8_e4m3fnuz},
    {"fp8_e5m2fnuz", S::Family::fp8, FormatId::fp8_e5m2fnuz},
    {"mxfp8_e4m3fn", S::Family::mx, FormatId::fp8_e4m3fn},
    {"mxfp8_e5m2", S::Family::mx, FormatId::fp8_e5m2},
    {"mxfp6_e2m3fn", S::Family::mx, FormatId::fp6_e2m3fn},
    {"mxfp6_e3m2fn", S::Family::mx, FormatId::fp6_e3m2fn},
    {"mxfp4_e2m1fn", S::Family::mx, FormatId::fp4_e2m1fn},
    {"mxint8", S::Family::mx, FormatId::int8},
    {"f32", S::Family::identity, FormatId::f32},
}};

std::string heads_list() {
  std::string s;
  for (const auto& h : kHeads) s += (s.empty() ? "" : ", ") + std::string(h.name);
  return s;
}

// Keys each family accepts, in canonical print order (granularity tokens come first).
std::string_view family_keys(S::Family f) {
  switch (f) {
    case S::Family::identity: return "none";
    case S::Family::cast: return "round, overflow";
    case S::Family::int8:
      return "per_tensor, per_block=N, per_warp=sm89|sm90, per_thread=sm89|sm90, per_token, per_channel, role, "
             "scale, round, apply, smooth, prescale, rotate";
    case S::Family::fp8:
      return "per_tensor, per_block=N, per_warp=sm89|sm90, per_thread=sm89|sm90, per_token, per_channel, role, "
             "scale, scale_max, round, overflow, apply, smooth, prescale, rotate";
    case S::Family::mx: return "block, scale, round, overflow, smooth, prescale, rotate";
  }
  return "";
}

std::string shortest(float v) {
  std::array<char, 32> buf{};
  auto [p, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), p);
}

bool takes_rows(S::Granularity g) { return g == S::Granularity::per_warp || g == S::Granularity::per_thread; }

// The checks shared by parse_scheme and validate_scheme (a hand-built struct gets the same scrutiny).
void check(const Scheme& s, std::string_view text) {
  auto bad = [&](const std::string& why) { throw Error("scheme '" + std::string(text) + "': " + why); };
  bool head_ok = false;
  for (const auto& h : kHeads) head_ok = head_ok || (h.family == s.family && h.element == s.element);
  if (!head_ok) bad("element " + std::string(name(s.element)) + " does not belong to this family");
  const Scheme d = default_scheme(scheme_head(s));
  if (s.family == S::Family::identity) {
    if (s != d) bad("f32 takes no options");
    return;
  }
  const bool grouped = s.family == S::Family::int8 || s.family == S::Family::fp8;
  if (grouped) {
    if (s.granularity == S::Granularity::per_block ? s.block < 1 : s.block != 0)
      bad(s.granularity == S::Granularity::per_block ? "per_block needs a token count >= 1" : "block applies to per_block only");
    if (!takes_rows(s.granularity) && (s.role != d.role || s.arch != d.arch))
      bad("role and the Sage architecture apply to per_warp / per_thread only");
    if (s.apply == S::ApplyOp::mul && s.scale != S::ScaleRule::ieee && s.scale != S::ScaleRule::rcp &&
        s.scale != S::ScaleRule::floor)
      bad("apply=mul needs scale=ieee, rcp or floor (it multiplies by fl(max / amax))");
    if (!(std::isfinite(s.scale_max) && s.scale_max > 0)) bad("scale_max must be finite and > 0");
    if (s.family == S::Family::int8 && (s.scale_max != 127.0f || s.elem_round != d.elem_round || s.overflow != d.overflow))
      bad("int8 has a fixed maximum 127 and rounds by `round=rne|half`");
    if (s.family == S::Family::fp8 && s.int_round != d.int_round) bad("fp8 rounds by `round=rne|away|smaller`");
    if (s.e8m0 != d.e8m0) bad("E8M0 scale rules apply to the mx family only");
  } else {
    if (s.granularity != d.granularity || s.role != d.role || s.arch != d.arch || s.scale != d.scale ||
        s.scale_max != d.scale_max || s.int_round != d.int_round || s.apply != d.apply)
      bad("granularity, role, uniform scale rules, scale_max, int rounding and apply do not apply to " + scheme_head(s));
    if (s.family == S::Family::mx && s.block < 1) bad("block must be >= 1");
    if (s.family == S::Family::cast) {
      if (s.block != 0 || s.e8m0 != d.e8m0) bad("a cast has no blocks or scales");
      if (s.smooth != d.smooth || s.prescale != d.prescale || s.rotate != d.rotate)
        bad("a cast has no smoothing, prescale or rotation");
    }
  }
}

std::int64_t parse_count(std::string_view v, std::string_view key, std::string_view text) {
  std::int64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size() || n < 1 || n > (std::int64_t{1} << 40))
    throw Error("scheme '" + std::string(text) + "': " + std::string(key) + " needs a positive integer, got '" +
                std::string(v) + "'");
  return n;
}

}  // namespace

std::string_view name(S::Family v) { return name_of(Table<S::Family>(kFamily), v); }
std::string_view name(S::Granularity v) { return name_of(Table<S::Granularity>(kGran), v); }
std::string_view name(S::SageArch v) { return name_of(Table<S::SageArch>(kArch), v); }
std::string_view name(S::Role v) { return name_of(Table<S::Role>(kRole), v); }
std::string_view name(S::ScaleRule v) { return name_of(Table<S::ScaleRule>(kScale), v); }
std::string_view name(S::E8M0Rule v) { return name_of(Table<S::E8M0Rule>(kE8m0), v); }
std::string_view name(S::IntRounding v) { return name_of(Table<S::IntRounding>(kIntRound), v); }
std::string_view name(S::Rounding v) { return name_of(Table<S::Rounding>(kElemRound), v); }
std::string_view name(S::Overflow v) { return name_of(Table<S::Overflow>(kOverflow), v); }
std::string_view name(S::ApplyOp v) { return name_of(Table<S::ApplyOp>(kApply), v); }
std::string_view name(S::Smoothing v) { return name_of(Table<S::Smoothing>(kSmooth), v); }
std::string_view name(S::Prescale v) { return name_of(Table<S::Prescale>(kPrescale), v); }
std::string_view name(S::Rotation v) { return name_of(Table<S::Rotation>(kRotate), v); }

S::E8M0Rule parse_e8m0_rule(std::string_view n) { return lookup(Table<S::E8M0Rule>(kE8m0), n, "E8M0 scale rule", n); }
S::Rounding parse_rounding(std::string_view n) {
  for (const auto& [e, v] : kElemRound)
    if (v == n) return e;
  throw Error("unknown rounding '" + std::string(n) + "' (valid: " + valid_list(Table<S::Rounding>(kElemRound)) + ")");
}
S::Overflow parse_overflow(std::string_view n) {
  for (const auto& [e, v] : kOverflow)
    if (v == n) return e;
  throw Error("unknown overflow mode '" + std::string(n) + "' (valid: " + valid_list(Table<S::Overflow>(kOverflow)) + ")");
}

Scheme default_scheme(std::string_view head) {
  for (const auto& h : kHeads) {
    if (h.name != head) continue;
    Scheme s;
    s.family = h.family;
    s.element = h.element;
    switch (h.family) {
      case S::Family::identity: break;
      case S::Family::cast: s.overflow = S::Overflow::ieee; break;
      case S::Family::int8: break;
      case S::Family::fp8:
        s.apply = S::ApplyOp::mul;
        s.scale_max = static_cast<float>(format_spec(h.element).max_finite);
        break;
      case S::Family::mx: s.block = 32; break;
    }
    return s;
  }
  throw Error("unknown quantizer scheme '" + std::string(head) + "' (valid heads: " + heads_list() + ")");
}

std::string scheme_head(const Scheme& s) {
  for (const auto& h : kHeads)
    if (h.family == s.family && h.element == s.element) return std::string(h.name);
  return "?";
}

void validate_scheme(const Scheme& s) { check(s, to_string(s)); }

std::string to_string(const Scheme& s) {
  const std::string head = scheme_head(s);
  std::string out = head;
  if (head == "?") return out;
  const Scheme d = default_scheme(head);
  auto add = [&](std::string_view k, std::string_view v) { out += ":" + std::string(k) + "=" + std::string(v); };
  if (s.family == S::Family::int8 || s.family == S::Family::fp8) {
    out += ":" + std::string(name(s.granularity));
    if (s.granularity == S::Granularity::per_block) out += "=" + std::to_string(s.block);
    if (takes_rows(s.granularity)) out += "=" + std::string(name(s.arch));
    if (s.role != d.role) add("role", name(s.role));
    if (s.scale != d.scale) add("scale", name(s.scale));
    if (s.scale_max != d.scale_max) add("scale_max", shortest(s.scale_max));
  }
  if (s.family == S::Family::mx) {
    if (s.block != d.block) add("block", std::to_string(s.block));
    if (s.e8m0 != d.e8m0) add("scale", name(s.e8m0));
  }
  if (s.int_round != d.int_round) add("round", name(s.int_round));
  if (s.elem_round != d.elem_round) add("round", name(s.elem_round));
  if (s.overflow != d.overflow) add("overflow", name(s.overflow));
  if (s.apply != d.apply) add("apply", name(s.apply));
  if (s.smooth != d.smooth) add("smooth", name(s.smooth));
  if (s.prescale != d.prescale) add("prescale", name(s.prescale));
  if (s.rotate != d.rotate) add("rotate", name(s.rotate));
  return out;
}

Scheme parse_scheme(std::string_view text) {
  std::vector<std::string_view> items;
  for (std::string_view rest = text;;) {
    const auto colon = rest.find(':');
    items.push_back(rest.substr(0, colon));
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  const std::string t(text);
  Scheme s;
  try {
    s = default_scheme(items[0]);
  } catch (const Error& e) {
    // Name the whole text as well when the head is only part of it.
    if (items.size() == 1) throw;
    throw Error("scheme '" + t + "': " + e.what());
  }
  const std::string head(items[0]);
  auto bad = [&](const std::string& why) { throw Error("scheme '" + t + "': " + why); };
  if (s.family == S::Family::identity && items.size() > 1) bad("f32 takes no options");
  const bool grouped = s.family == S::Family::int8 || s.family == S::Family::fp8;
  bool have_gran = false;
  std::vector<std::string_view> seen;
  for (std::size_t i = 1; i < items.size(); ++i) {
    const std::string_view item = items[i];
    const auto eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    const bool has_value = eq != std::string_view::npos;
    const std::string_view val = has_value ? item.substr(eq + 1) : std::string_view{};
    if (key.empty()) bad("empty item (valid keys for " + head + ": " + std::string(family_keys(s.family)) + ")");
    for (const auto& k : seen)
      if (k == key) bad("duplicate key '" + std::string(key) + "'");
    seen.push_back(key);
    auto need_value = [&] {
      if (!has_value || val.empty()) bad("key '" + std::string(key) + "' needs a value");
    };
    bool is_gran = false;
    for (const auto& [g, n] : kGran) {
      if (n != key) continue;
      is_gran = true;
      if (!grouped) break;
      if (have_gran) bad("two granularities ('" + std::string(name(s.granularity)) + "' and '" + std::string(n) + "')");
      have_gran = true;
      s.granularity = g;
      if (g == S::Granularity::per_block) {
        need_value();
        s.block = parse_count(val, key, text);
      } else if (takes_rows(g)) {
        need_value();
        s.arch = lookup(Table<S::SageArch>(kArch), val, std::string(n) + " architecture", text);
      } else if (has_value) {
        bad("'" + std::string(n) + "' takes no value");
      }
    }
    if (is_gran && grouped) continue;
    auto allowed = [&](bool ok) {
      if (!ok)
        bad("key '" + std::string(key) + "' does not apply to " + head + " (valid: " +
            std::string(family_keys(s.family)) + ")");
      need_value();
    };
    if (is_gran) {
      allowed(false);
    } else if (key == "role") {
      allowed(grouped);
      s.role = lookup(Table<S::Role>(kRole), val, "role", text);
    } else if (key == "block") {
      allowed(s.family == S::Family::mx);
      s.block = parse_count(val, key, text);
    } else if (key == "scale") {
      allowed(s.family != S::Family::cast);
      if (s.family == S::Family::mx) s.e8m0 = lookup(Table<S::E8M0Rule>(kE8m0), val, "E8M0 scale rule", text);
      else s.scale = lookup(Table<S::ScaleRule>(kScale), val, "scale rule", text);
    } else if (key == "scale_max") {
      allowed(s.family == S::Family::fp8);
      float v = 0;
      auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), v);
      if (ec != std::errc() || p != val.data() + val.size() || !(std::isfinite(v) && v > 0))
        bad("scale_max needs a finite number > 0, got '" + std::string(val) + "'");
      s.scale_max = v;
    } else if (key == "round") {
      allowed(true);
      if (s.family == S::Family::int8) s.int_round = lookup(Table<S::IntRounding>(kIntRound), val, "int8 rounding", text);
      else s.elem_round = lookup(Table<S::Rounding>(kElemRound), val, "rounding", text);
    } else if (key == "overflow") {
      allowed(s.family != S::Family::int8);
      s.overflow = lookup(Table<S::Overflow>(kOverflow), val, "overflow", text);
    } else if (key == "apply") {
      allowed(grouped);
      s.apply = lookup(Table<S::ApplyOp>(kApply), val, "apply", text);
    } else if (key == "smooth") {
      allowed(s.family != S::Family::cast);
      s.smooth = lookup(Table<S::Smoothing>(kSmooth), val, "smoothing", text);
    } else if (key == "prescale") {
      allowed(s.family != S::Family::cast);
      s.prescale = lookup(Table<S::Prescale>(kPrescale), val, "prescale", text);
    } else if (key == "rotate") {
      allowed(s.family != S::Family::cast);
      s.rotate = lookup(Table<S::Rotation>(kRotate), val, "rotation", text);
    } else {
      bad("unknown key '" + std::string(key) + "' for " + head + " (valid: " + std::string(family_keys(s.family)) + ")");
    }
  }
  if (grouped && !have_gran)
    bad("missing granularity (one of per_tensor, per_block=N, per_warp=sm89|sm90, per_thread=sm89|sm90, per_token, per_channel)");
  check(s, text);
  return s;
}

}  // namespace attest

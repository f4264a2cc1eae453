#include "attest/core/recipe.hpp"

#include <array>
#include <charconv>
#include <utility>

#include "attest/core/enum_names.hpp"
#include "attest/core/status.hpp"

namespace attest {
namespace {

template <class E, std::size_t N>
using Table = std::array<std::pair<E, std::string_view>, N>;

// The P / O formats are rows of the format table (format.hpp): their names are its names.
constexpr Table<FormatId, kRecipeElemFormats.size()> kElem = [] {
  Table<FormatId, kRecipeElemFormats.size()> t{};
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = {kRecipeElemFormats[i], name(kRecipeElemFormats[i])};
  return t;
}();
constexpr Table<PScale, 3> kPScale{{{PScale::unit, "unit"}, {PScale::offset_8807, "offset_8807"}, {PScale::pow2_8, "pow2_8"}}};
constexpr Table<Exp2Policy, 3> kExp2{{{Exp2Policy::cr, "cr"}, {Exp2Policy::fa4, "fa4"}, {Exp2Policy::hw, "hw"}}};
constexpr Table<RescalePolicy, 2> kRescale{{{RescalePolicy::always, "always"}, {RescalePolicy::conditional, "conditional"}}};
constexpr Table<DivisionOp, 3> kDiv{{{DivisionOp::ieee_div, "ieee_div"}, {DivisionOp::ieee_rcp, "ieee_rcp"}, {DivisionOp::rcp_sm90, "rcp_sm90"}}};
constexpr Table<VScaleAt, 2> kVScale{{{VScaleAt::out, "out"}, {VScaleAt::rcp, "rcp"}}};

template <class E, std::size_t N>
std::string_view lookup(const Table<E, N>& t, E e) {
  return enum_name(e, t);
}

template <class E, std::size_t N>
E parse_in(const Table<E, N>& t, std::string_view s, std::string_view what) {
  return parse_enum(s, t, what, "recipe: ");
}

std::string shortest(double v) {
  std::array<char, 64> buf{};
  auto [p, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), p);
}

template <class T>
T parse_number(std::string_view s, std::string_view what) {
  T v{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size())
    throw Error("recipe: bad number '" + std::string(s) + "' for " + std::string(what));
  return v;
}

// A quantizer scheme field (q, k, v, p_mx), parsed with the scheme grammar.
Scheme scheme_field(std::string_view value, std::string_view key) {
  try {
    return parse_scheme(value);
  } catch (const Error& e) {
    throw Error("recipe: field " + std::string(key) + ": " + e.what());
  }
}

}  // namespace

std::string_view name(PScale e) { return lookup(kPScale, e); }
std::string_view name(Exp2Policy e) { return lookup(kExp2, e); }
std::string_view name(RescalePolicy e) { return lookup(kRescale, e); }
std::string_view name(DivisionOp e) { return lookup(kDiv, e); }
std::string_view name(VScaleAt e) { return lookup(kVScale, e); }

std::string to_string(const Recipe& r) {
  const Recipe d;
  std::string s;
  auto add = [&s](std::string_view key, std::string_view value) {
    s += (s.empty() ? "" : ";") + std::string(key) + "=" + std::string(value);
  };
  // q, k, v are always printed: they are the identity of the recipe.
  add("q", to_string(r.q));
  add("k", to_string(r.k));
  add("v", to_string(r.v));
  if (r.p != d.p) add("p", name(r.p));
  if (r.pscale != d.pscale) add("pscale", name(r.pscale));
  if (r.exp2 != d.exp2) add("exp2", name(r.exp2));
  if (r.rescale != d.rescale) add("rescale", name(r.rescale));
  if (r.rescale_threshold != d.rescale_threshold) add("rescale_threshold", shortest(r.rescale_threshold));
  if (r.div != d.div) add("div", name(r.div));
  if (r.tile_q != d.tile_q) add("tile_q", std::to_string(r.tile_q));
  if (r.tile_kv != d.tile_kv) add("tile_kv", std::to_string(r.tile_kv));
  if (r.out != d.out) add("out", name(r.out));
  if (r.vscale != d.vscale) add("vscale", name(r.vscale));
  if (r.p_mx) add("p_mx", to_string(*r.p_mx));
  if (r.pv_acc != d.pv_acc) add("pv_acc", name(r.pv_acc));
  return s;
}

Recipe parse_recipe(std::string_view text) {
  if (text.find('=') == std::string_view::npos) {
    std::string valid;
    for (const auto& n : named_recipes()) {
      if (n.name == text) return parse_recipe(n.definition);
      valid += (valid.empty() ? "" : ", ") + std::string(n.name);
    }
    throw Error("unknown recipe '" + std::string(text) + "' (named recipes: " + valid + ")");
  }
  Recipe r;
  std::string seen;
  while (!text.empty()) {
    const auto semi = text.find(';');
    const auto item = text.substr(0, semi);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) throw Error("recipe: field '" + std::string(item) + "' needs key=value");
    const auto key = item.substr(0, eq), value = item.substr(eq + 1);
    if (seen.find("," + std::string(key) + ",") != std::string::npos)
      throw Error("recipe: field '" + std::string(key) + "' given twice");
    seen += "," + std::string(key) + ",";
    if (key == "q") r.q = scheme_field(value, key);
    else if (key == "k") r.k = scheme_field(value, key);
    else if (key == "v") r.v = scheme_field(value, key);
    else if (key == "p") r.p = parse_in(kElem, value, "p format");
    else if (key == "pscale") r.pscale = parse_in(kPScale, value, "pscale");
    else if (key == "exp2") r.exp2 = parse_in(kExp2, value, "exp2 policy");
    else if (key == "rescale") r.rescale = parse_in(kRescale, value, "rescale policy");
    else if (key == "rescale_threshold") r.rescale_threshold = parse_number<double>(value, key);
    else if (key == "div") r.div = parse_in(kDiv, value, "division op");
    else if (key == "tile_q") r.tile_q = parse_number<int>(value, key);
    else if (key == "tile_kv") r.tile_kv = parse_number<int>(value, key);
    else if (key == "out") r.out = parse_in(kElem, value, "output format");
    else if (key == "vscale") r.vscale = parse_in(kVScale, value, "vscale");
    else if (key == "p_mx") {
      if (value.empty()) throw Error("recipe: p_mx needs a scheme");
      r.p_mx = scheme_field(value, key);
    } else if (key == "pv_acc") {
      r.pv_acc = parse_in(kElem, value, "pv_acc format");
      if (r.pv_acc != FormatId::f32 && r.pv_acc != FormatId::fp16)
        throw Error("recipe: pv_acc must be f32 or fp16 (got '" + std::string(value) + "')");
    } else
      throw Error("recipe: unknown field '" + std::string(key) +
                  "' (valid: q k v p pscale exp2 rescale rescale_threshold div tile_q tile_kv out vscale p_mx pv_acc)");
    if (semi == std::string_view::npos) break;
    text.remove_prefix(semi + 1);
  }
  if (r.tile_q < 1 || r.tile_kv < 1) throw Error("recipe: tile sizes must be >= 1");
  if (r.vscale == VScaleAt::rcp && r.div == DivisionOp::ieee_div)
    throw Error("recipe: vscale=rcp needs div=ieee_rcp or rcp_sm90 (ieee_div has no reciprocal to fold V's scale into)");
  return r;
}

std::string recipe_label(const Recipe& r) {
  for (const auto& n : named_recipes())
    if (parse_recipe(n.definition) == r) return std::string(n.name);
  return to_string(r);
}

}  // namespace attest

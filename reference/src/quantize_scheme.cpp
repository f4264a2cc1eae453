// Quantizer scheme strings, read by core's grammar (attest/core/scheme.hpp) and converted to the
// reference's QuantScheme (its Family has no identity and its element is a codec Format).
#include <string>

#include "attest/core/status.hpp"
#include "attest/reference/quantize.hpp"

namespace attest::ref {
namespace {

Family family_of(Scheme::Family f, std::string_view head) {
  switch (f) {
    case Scheme::Family::cast: return Family::cast;
    case Scheme::Family::int8: return Family::int8;
    case Scheme::Family::fp8: return Family::fp8;
    case Scheme::Family::mx: return Family::mx;
    case Scheme::Family::identity: break;
  }
  // Accepted by the grammar for recipes (an operand left as it is); a quantizer has nothing to
  // produce for it: no codes, no scales.
  throw Error("scheme '" + std::string(head) + "': f32 is the identity operand of a recipe, not a quantizer");
}

Scheme::Family core_family(Family f) {
  switch (f) {
    case Family::cast: return Scheme::Family::cast;
    case Family::int8: return Scheme::Family::int8;
    case Family::fp8: return Scheme::Family::fp8;
    case Family::mx: return Scheme::Family::mx;
  }
  return Scheme::Family::identity;
}

}  // namespace

QuantScheme from_core(const Scheme& c) {
  QuantScheme s;
  s.family = family_of(c.family, scheme_head(c));
  s.element = from_format_id(c.element);
  s.granularity = c.granularity;
  s.block = c.block;
  s.arch = c.arch;
  s.role = c.role;
  s.scale = c.scale;
  s.scale_max = c.scale_max;
  s.e8m0 = c.e8m0;
  s.int_round = c.int_round;
  s.elem_round = c.elem_round;
  s.overflow = c.overflow;
  s.apply = c.apply;
  s.smooth = c.smooth;
  s.prescale = c.prescale;
  s.rotate = c.rotate;
  return s;
}

Scheme to_core(const QuantScheme& s) {
  Scheme c;
  c.family = core_family(s.family);
  c.element = to_format_id(s.element);
  c.granularity = s.granularity;
  c.block = s.block;
  c.arch = s.arch;
  c.role = s.role;
  c.scale = s.scale;
  c.scale_max = s.scale_max;
  c.e8m0 = s.e8m0;
  c.int_round = s.int_round;
  c.elem_round = s.elem_round;
  c.overflow = s.overflow;
  c.apply = s.apply;
  c.smooth = s.smooth;
  c.prescale = s.prescale;
  c.rotate = s.rotate;
  return c;
}

std::string_view granularity_name(Granularity g) { return name(g); }
std::string_view scale_rule_name(ScaleRule r) { return name(r); }
std::string_view e8m0_rule_name(E8M0Rule r) { return name(r); }
E8M0Rule parse_e8m0_rule(std::string_view n) { return attest::parse_e8m0_rule(n); }

QuantScheme default_scheme(std::string_view head) { return from_core(attest::default_scheme(head)); }
std::string scheme_head(const QuantScheme& s) { return attest::scheme_head(to_core(s)); }
void validate_scheme(const QuantScheme& s) { attest::validate_scheme(to_core(s)); }
std::string to_string(const QuantScheme& s) { return attest::to_string(to_core(s)); }
QuantScheme parse_scheme(std::string_view text) { return from_core(attest::parse_scheme(text)); }

}  // namespace attest::ref

// The shared scheme grammar: every scheme the repository's recipes and case files use parses and
// prints back to the same text, the parsed fields are the ones the recipe comments describe, and
// bad input fails with a message naming the text and the defect.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "attest/core/recipe.hpp"
#include "attest/core/scheme.hpp"
#include "attest/core/status.hpp"

namespace attest {
namespace {

using S = Scheme;

std::string error_of(std::string_view text) {
  try {
    (void)parse_scheme(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<std::string> recipe_schemes(const Recipe& r) {
  std::vector<std::string> v{to_string(r.q), to_string(r.k), to_string(r.v)};
  if (r.p_mx) v.push_back(to_string(*r.p_mx));
  return v;
}

// '*' matches any run of characters (the case files' recipe globs).
bool glob_match(std::string_view pat, std::string_view s) {
  if (pat.empty()) return s.empty();
  if (pat[0] == '*')
    for (std::size_t i = 0; i <= s.size(); ++i)
      if (glob_match(pat.substr(1), s.substr(i))) return true;
  return !s.empty() && pat[0] == s[0] && glob_match(pat.substr(1), s.substr(1));
}

TEST(Scheme, EveryNamedRecipeSchemeIsCanonicalAndRoundTrips) {
  int n = 0;
  for (const auto& nr : named_recipes()) {
    for (const std::string& text : recipe_schemes(parse_recipe(nr.definition))) {
      const Scheme s = parse_scheme(text);
      EXPECT_EQ(to_string(s), text) << nr.name;  // the named recipes are written in canonical form
      EXPECT_EQ(parse_scheme(to_string(s)), s) << nr.name << " " << text;
      ++n;
    }
  }
  EXPECT_EQ(n, 18 * 3 + 4);  // 18 recipes x (q, k, v) + the four MXFP4-P recipes' p_mx
}

TEST(Scheme, EveryRecipeOfTheCaseFilesParses) {
  // datasets/cases name recipes by glob (recipe=*, recipe=*_had); each must select at least one
  // named recipe, and all their schemes must round-trip.
  const std::filesystem::path dir = ATTEST_CASES_DIR;
  std::set<std::string> globs;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".cases") continue;
    std::ifstream in(entry.path());
    std::string word;
    while (in >> word)
      if (word.rfind("recipe=", 0) == 0) globs.insert(word.substr(7));
  }
  ASSERT_FALSE(globs.empty()) << dir;
  for (const std::string& g : globs) {
    std::stringstream alts(g);
    for (std::string pat; std::getline(alts, pat, ',');) {
      int matched = 0;
      for (const auto& nr : named_recipes()) {
        if (!glob_match(pat, nr.name)) continue;
        ++matched;
        for (const std::string& text : recipe_schemes(parse_recipe(nr.definition)))
          EXPECT_EQ(to_string(parse_scheme(text)), text) << pat << " " << nr.name;
      }
      EXPECT_GT(matched, 0) << "recipe=" << pat << " selects no named recipe";
    }
  }
}

TEST(Scheme, FieldsAreWhatTheRecipeCommentsSay) {
  // named_recipes.cpp: Sage Triton Q is 128-token blocks, pre-scaled, rounded +-0.5 and truncated.
  S q = parse_scheme("int8:per_block=128:round=half:prescale=sm_log2e");
  EXPECT_EQ(q.family, S::Family::int8);
  EXPECT_EQ(q.granularity, S::Granularity::per_block);
  EXPECT_EQ(q.block, 128);
  EXPECT_EQ(q.int_round, S::IntRounding::half);
  EXPECT_EQ(q.prescale, S::Prescale::sm_log2e);
  EXPECT_EQ(q.apply, S::ApplyOp::div);
  // Sage V: x * (448 / amax), saturating; 448 is the e4m3fn maximum.
  const S v = parse_scheme("fp8_e4m3fn:per_channel");
  EXPECT_EQ(v.apply, S::ApplyOp::mul);
  EXPECT_EQ(v.scale_max, 448.0f);
  EXPECT_EQ(v.overflow, S::Overflow::sat_cuda);
  EXPECT_EQ(parse_scheme("fp8_e4m3fnuz:per_tensor").scale_max, 240.0f);
  EXPECT_EQ(parse_scheme("fp8_e5m2:per_tensor").scale_max, 57344.0f);
  // MX: 32 channels per E8M0 scale, OCP floor rule unless told.
  const S mx = parse_scheme("mxfp4_e2m1fn:scale=aiter_hip_fp4:round=smaller");
  EXPECT_EQ(mx.element, FormatId::fp4_e2m1fn);
  EXPECT_EQ(mx.block, 32);
  EXPECT_EQ(mx.e8m0, S::E8M0Rule::aiter_hip_fp4);
  EXPECT_EQ(mx.elem_round, S::Rounding::smaller);
  EXPECT_EQ(parse_scheme("mxint8").element, FormatId::int8);
  EXPECT_EQ(parse_scheme("bf16").overflow, S::Overflow::ieee);  // a cast is an ml_dtypes cast
  const S id = parse_scheme("f32");
  EXPECT_EQ(id.family, S::Family::identity);
  EXPECT_EQ(id.element, FormatId::f32);
  EXPECT_EQ(to_string(id), "f32");
}

TEST(Scheme, CanonicalFormSortsKeysAndDropsDefaults) {
  EXPECT_EQ(to_string(parse_scheme("int8:round=half:per_block=128")), "int8:per_block=128:round=half");
  EXPECT_EQ(to_string(parse_scheme("int8:per_block=64:scale=ieee:round=rne")), "int8:per_block=64");
  EXPECT_EQ(to_string(parse_scheme("fp8_e4m3fn:per_channel:scale_max=448:scale=rcp")), "fp8_e4m3fn:per_channel:scale=rcp");
  EXPECT_EQ(to_string(parse_scheme("mxfp4_e2m1fn:rotate=h32_bf16:block=32:scale=aiter_triton_rne")),
            "mxfp4_e2m1fn:scale=aiter_triton_rne:rotate=h32_bf16");
}

TEST(Scheme, BadInputNamesTheTextAndTheDefect) {
  const std::string heads =
      "bf16, fp16, int8, fp8_e4m3fn, fp8_e5m2, fp8_e4m3fnuz, fp8_e5m2fnuz, mxfp8_e4m3fn, mxfp8_e5m2, mxfp6_e2m3fn, "
      "mxfp6_e3m2fn, mxfp4_e2m1fn, mxint8, f32";
  EXPECT_EQ(error_of("int4"), "unknown quantizer scheme 'int4' (valid heads: " + heads + ")");
  EXPECT_EQ(error_of("int4:per_tensor"),
            "scheme 'int4:per_tensor': unknown quantizer scheme 'int4' (valid heads: " + heads + ")");
  EXPECT_EQ(error_of(""), "unknown quantizer scheme '' (valid heads: " + heads + ")");
  EXPECT_EQ(error_of("f32:per_tensor"), "scheme 'f32:per_tensor': f32 takes no options");
  EXPECT_EQ(error_of("int8:round=rne"),
            "scheme 'int8:round=rne': missing granularity (one of per_tensor, per_block=N, per_warp=sm89|sm90, "
            "per_thread=sm89|sm90, per_token, per_channel)");
  EXPECT_EQ(error_of("int8:per_tensor:per_token"), "scheme 'int8:per_tensor:per_token': two granularities ('per_tensor' and 'per_token')");
  EXPECT_EQ(error_of("int8:per_block=0"), "scheme 'int8:per_block=0': per_block needs a positive integer, got '0'");
  EXPECT_EQ(error_of("int8:per_block"), "scheme 'int8:per_block': key 'per_block' needs a value");
  EXPECT_EQ(error_of("int8:per_tensor=3"), "scheme 'int8:per_tensor=3': 'per_tensor' takes no value");
  EXPECT_EQ(error_of("int8:per_thread=sm80"),
            "scheme 'int8:per_thread=sm80': unknown per_thread architecture 'sm80' (valid: sm89, sm90)");
  EXPECT_EQ(error_of("int8:per_block=64:scale=bogus"),
            "scheme 'int8:per_block=64:scale=bogus': unknown scale rule 'bogus' (valid: ieee, rcp, eps, floor, ieee_one, none)");
  EXPECT_EQ(error_of("mxfp4_e2m1fn:scale=ieee"),
            "scheme 'mxfp4_e2m1fn:scale=ieee': unknown E8M0 scale rule 'ieee' (valid: floor, ceil, rceil, aiter_hip_fp4, "
            "aiter_triton_v_fp4, aiter_triton_rne, aiter_hip_fp8, aiter_hip_fp6)");
  EXPECT_EQ(error_of("int8:per_block=64:round=half:round=rne"), "scheme 'int8:per_block=64:round=half:round=rne': duplicate key 'round'");
  EXPECT_EQ(error_of("int8:per_block=64:role=k"),
            "scheme 'int8:per_block=64:role=k': role and the Sage architecture apply to per_warp / per_thread only");
  EXPECT_EQ(error_of("int8:per_token:scale=eps:apply=mul"),
            "scheme 'int8:per_token:scale=eps:apply=mul': apply=mul needs scale=ieee, rcp or floor (it multiplies by fl(max / amax))");
  EXPECT_EQ(error_of("bf16:smooth=fp32"), "scheme 'bf16:smooth=fp32': key 'smooth' does not apply to bf16 (valid: round, overflow)");
  EXPECT_EQ(error_of("fp8_e4m3fn:per_channel:scale_max=inf"),
            "scheme 'fp8_e4m3fn:per_channel:scale_max=inf': scale_max needs a finite number > 0, got 'inf'");
  EXPECT_EQ(error_of("int8:per_tensor::round=half").find("scheme 'int8:per_tensor::round=half': empty item"), 0u);
  EXPECT_EQ(error_of("int8:per_block=64:foo=1").find("scheme 'int8:per_block=64:foo=1': unknown key 'foo' for int8"), 0u);
}

TEST(Scheme, HandBuiltSchemesAreValidated) {
  S s = default_scheme("int8");
  s.apply = S::ApplyOp::mul;
  s.scale = S::ScaleRule::none;
  EXPECT_THROW(validate_scheme(s), Error);
  s = default_scheme("f32");
  EXPECT_NO_THROW(validate_scheme(s));
  s.smooth = S::Smoothing::fp32;
  EXPECT_THROW(validate_scheme(s), Error);
  s = default_scheme("int8");
  s.element = FormatId::fp8_e4m3fn;
  EXPECT_THROW(validate_scheme(s), Error);
  EXPECT_EQ(scheme_head(s), "?");
}

TEST(Scheme, ValueNamesParseBack) {
  EXPECT_EQ(parse_e8m0_rule("rceil"), S::E8M0Rule::rceil);
  EXPECT_EQ(parse_rounding("smaller"), S::Rounding::smaller);
  EXPECT_EQ(parse_overflow("sat_hip"), S::Overflow::sat_hip);
  EXPECT_THROW(parse_rounding("up"), Error);
  EXPECT_THROW(parse_overflow("wrap"), Error);
  EXPECT_EQ(name(S::Rotation::h128_bf16), "h128_bf16");
  EXPECT_EQ(name(S::Granularity::per_thread), "per_thread");
}

}  // namespace
}  // namespace attest

// Scheme strings: round trip over random schemes, canonical printing, and the error messages.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "attest/reference/quantize.hpp"

namespace attest::ref {
namespace {

std::string error_of(const std::string& text) {
  try {
    require_quantizer(parse_scheme(text));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

Scheme random_scheme(std::mt19937& rng) {
  auto pick = [&](int n) { return static_cast<int>(std::uniform_int_distribution<int>(0, n - 1)(rng)); };
  static const char* heads[] = {"bf16", "fp16", "int8", "fp8_e4m3fn", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz",
                                "mxfp8_e4m3fn", "mxfp8_e5m2", "mxfp6_e2m3fn", "mxfp6_e3m2fn", "mxfp4_e2m1fn", "mxint8"};
  Scheme s = default_scheme(heads[pick(13)]);
  if (s.family == Family::cast) {
    s.elem_round = static_cast<Rounding>(pick(3));
    s.overflow = static_cast<Overflow>(pick(3));
    return s;
  }
  s.smooth = static_cast<Smoothing>(pick(3));
  s.prescale = static_cast<Prescale>(pick(2));
  s.rotate = static_cast<Rotation>(pick(4));
  if (s.family == Family::mx) {
    s.block = pick(3) == 0 ? 1 + pick(128) : 32;
    s.e8m0 = static_cast<E8M0Rule>(pick(8));
    s.elem_round = static_cast<Rounding>(pick(3));
    s.overflow = static_cast<Overflow>(pick(3));
    return s;
  }
  s.granularity = static_cast<Granularity>(pick(6));
  if (s.granularity == Granularity::per_block) s.block = 1 + pick(512);
  if (s.granularity == Granularity::per_warp || s.granularity == Granularity::per_thread) {
    s.arch = static_cast<SageArch>(pick(2));
    s.role = static_cast<Role>(pick(2));
  }
  s.scale = static_cast<ScaleRule>(pick(6));
  const bool mul_ok = s.scale == ScaleRule::ieee || s.scale == ScaleRule::rcp || s.scale == ScaleRule::floor;
  s.apply = mul_ok ? static_cast<ApplyOp>(pick(2)) : ApplyOp::div;
  if (s.family == Family::int8) {
    s.int_round = static_cast<IntRounding>(pick(2));
  } else {
    s.elem_round = static_cast<Rounding>(pick(3));
    s.overflow = static_cast<Overflow>(pick(3));
    const float maxes[] = {448.0f, 240.0f, 224.0f, 2.25f, 57344.0f, 0.1f, 1e-30f, 3.4e38f};
    if (pick(2) == 0) s.scale_max = maxes[pick(8)];
    if (pick(4) == 0) s.scale_max = std::uniform_real_distribution<float>(1e-3f, 1e4f)(rng);
  }
  return s;
}

TEST(SchemeString, RoundTripsOverRandomSchemes) {
  std::mt19937 rng(2024);
  for (int i = 0; i < 20000; ++i) {
    const Scheme s = random_scheme(rng);
    const std::string text = to_string(s);
    Scheme back;
    ASSERT_NO_THROW(back = parse_scheme(text)) << text;
    ASSERT_EQ(back, s) << text;
    ASSERT_EQ(to_string(back), text);
  }
}

TEST(SchemeString, CanonicalFormPrintsOnlyNonDefaults) {
  EXPECT_EQ(to_string(parse_scheme("int8:per_block=64:scale=ieee:round=rne")), "int8:per_block=64");
  EXPECT_EQ(to_string(parse_scheme("int8:round=half:per_block=128")), "int8:per_block=128:round=half");
  EXPECT_EQ(to_string(parse_scheme("fp8_e4m3fn:per_channel:scale_max=448:scale=rcp")), "fp8_e4m3fn:per_channel:scale=rcp");
  EXPECT_EQ(to_string(parse_scheme("fp8_e4m3fn:per_channel:scale_max=2.25")), "fp8_e4m3fn:per_channel:scale_max=2.25");
  EXPECT_EQ(to_string(parse_scheme("fp8_e4m3fnuz:per_channel:scale_max=240")), "fp8_e4m3fnuz:per_channel");
  EXPECT_EQ(to_string(parse_scheme("mxfp4_e2m1fn:block=32:scale=floor:round=rne")), "mxfp4_e2m1fn");
  EXPECT_EQ(to_string(parse_scheme("int8:per_thread=sm90:role=k:scale=eps:round=half:smooth=fp32")),
            "int8:per_thread=sm90:role=k:scale=eps:round=half:smooth=fp32");
  EXPECT_EQ(to_string(parse_scheme("bf16")), "bf16");
  const Scheme v = parse_scheme("fp8_e4m3fn:per_channel");
  EXPECT_EQ(v.apply, ApplyOp::mul);
  EXPECT_EQ(v.scale_max, 448.0f);
  EXPECT_EQ(v.overflow, Overflow::sat_cuda);
  EXPECT_EQ(parse_scheme("mxint8").block, 32);
}

TEST(SchemeString, ErrorsNameTheDefectAndTheValidChoices) {
  auto has = [](const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; };
  std::string m = error_of("int4:per_tensor");
  EXPECT_TRUE(has(m, "unknown quantizer scheme 'int4'") && has(m, "mxfp4_e2m1fn")) << m;
  m = error_of("int8:per_block=64:foo=1");
  EXPECT_TRUE(has(m, "unknown key 'foo'") && has(m, "smooth")) << m;
  m = error_of("int8:per_block=64:scale=bogus");
  EXPECT_TRUE(has(m, "unknown scale rule 'bogus'") && has(m, "ieee_one")) << m;
  m = error_of("mxfp4_e2m1fn:scale=ieee");
  EXPECT_TRUE(has(m, "unknown E8M0 scale rule 'ieee'") && has(m, "aiter_triton_rne")) << m;
  m = error_of("int8:round=rne");
  EXPECT_TRUE(has(m, "missing granularity")) << m;
  m = error_of("int8:per_tensor:per_token");
  EXPECT_TRUE(has(m, "two granularities")) << m;
  m = error_of("int8:per_block=0");
  EXPECT_TRUE(has(m, "positive integer")) << m;
  m = error_of("int8:per_block=x");
  EXPECT_TRUE(has(m, "positive integer")) << m;
  m = error_of("int8:per_block");
  EXPECT_TRUE(has(m, "needs a value")) << m;
  m = error_of("int8:per_tensor=3");
  EXPECT_TRUE(has(m, "takes no value")) << m;
  m = error_of("int8:per_thread=sm80");
  EXPECT_TRUE(has(m, "unknown per_thread architecture 'sm80'") && has(m, "sm89, sm90")) << m;
  m = error_of("int8:per_block=64:role=k");
  EXPECT_TRUE(has(m, "per_warp / per_thread only")) << m;
  m = error_of("int8:per_block=64:scale=eps:apply=mul");
  EXPECT_TRUE(has(m, "apply=mul needs")) << m;
  m = error_of("int8:per_block=64:scale_max=100");
  EXPECT_TRUE(has(m, "does not apply to int8")) << m;
  m = error_of("int8:per_block=64:round=away");
  EXPECT_TRUE(has(m, "unknown int8 rounding 'away'") && has(m, "half")) << m;
  m = error_of("int8:per_block=64:round=half:round=rne");
  EXPECT_TRUE(has(m, "duplicate key 'round'")) << m;
  m = error_of("fp8_e4m3fn:per_channel:scale_max=-1");
  EXPECT_TRUE(has(m, "finite number > 0")) << m;
  m = error_of("fp8_e4m3fn:per_channel:scale_max=inf");
  EXPECT_TRUE(has(m, "finite number > 0")) << m;
  m = error_of("mxfp4_e2m1fn:per_block=32");
  EXPECT_TRUE(has(m, "does not apply to mxfp4_e2m1fn")) << m;
  m = error_of("bf16:smooth=fp32");
  EXPECT_TRUE(has(m, "does not apply to bf16")) << m;
  m = error_of("int8:per_tensor::round=half");
  EXPECT_TRUE(has(m, "empty item")) << m;
  m = error_of("");
  EXPECT_TRUE(has(m, "unknown quantizer scheme ''")) << m;
  // The shared grammar accepts the identity f32 (recipes need it); a quantizer refuses it.
  m = error_of("f32");
  EXPECT_TRUE(has(m, "scheme 'f32': f32 is the identity operand of a recipe, not a quantizer")) << m;
}

TEST(SchemeString, RandomTextEitherFailsCleanlyOrRoundTrips) {
  // Strings glued from valid and invalid fragments: parse either throws attest::Error or yields
  // a scheme whose canonical string parses back to the same scheme.
  const std::vector<std::string> parts{"int8", "fp8_e4m3fn", "mxfp4_e2m1fn", "bf16", "per_tensor", "per_block=64",
                                       "per_thread=sm89", "role=k", "scale=eps", "scale=rceil", "round=half",
                                       "round=away", "apply=mul", "smooth=bf16", "scale_max=240", "block=16",
                                       "rotate=h128", "prescale=sm_log2e", "overflow=sat_hip", "=", "x", ""};
  std::mt19937 rng(99);
  int ok = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text = parts[rng() % 4];
    const int n = static_cast<int>(rng() % 5);
    for (int j = 0; j < n; ++j) text += ":" + parts[rng() % parts.size()];
    try {
      const Scheme s = parse_scheme(text);
      ASSERT_EQ(parse_scheme(to_string(s)), s) << text;
      ++ok;
    } catch (const Error&) {
    }
  }
  EXPECT_GT(ok, 1000);  // the generator does produce valid schemes
}

TEST(SchemeString, DocumentedExamplesParseCanonically) {
  // The examples table of docs/quantizer-schemes.md is written in canonical form.
  for (const char* text :
       {"int8:per_block=128:round=half:prescale=sm_log2e", "int8:per_block=64:round=half:smooth=bf16",
        "int8:per_thread=sm89:scale=eps:round=half:prescale=sm_log2e",
        "int8:per_thread=sm90:role=k:scale=eps:round=half:smooth=fp32",
        "int8:per_warp=sm89:scale=floor:apply=mul:prescale=sm_log2e", "int8:per_tensor:scale=ieee_one",
        "fp8_e4m3fn:per_channel", "fp8_e4m3fn:per_channel:scale_max=2.25",
        "fp8_e4m3fnuz:per_channel:scale=rcp:scale_max=224:overflow=sat_hip:apply=div",
        "mxfp4_e2m1fn:scale=aiter_triton_rne:rotate=h32_bf16",
        "mxfp6_e2m3fn:scale=aiter_hip_fp6:prescale=sm_log2e:rotate=h128_bf16", "mxfp8_e4m3fn:scale=rceil"})
    EXPECT_EQ(to_string(parse_scheme(text)), text);
}

TEST(SchemeString, HandBuiltSchemesAreValidated) {
  Scheme s = default_scheme("int8");
  s.apply = ApplyOp::mul;
  s.scale = ScaleRule::none;
  EXPECT_THROW(validate_scheme(s), Error);
  s = default_scheme("mxfp6_e2m3fn");
  s.block = 0;
  EXPECT_THROW(validate_scheme(s), Error);
  s = default_scheme("int8");
  s.element = FormatId::fp8_e4m3fn;
  EXPECT_THROW(validate_scheme(s), Error);
}

}  // namespace
}  // namespace attest::ref

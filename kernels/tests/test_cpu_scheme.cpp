// kernels/cpu's plan of a scheme: read by core's grammar, with the CPU kernels' own format
// constants, which must describe the rows of core's format table they stand for.
#include <gtest/gtest.h>

#include <string>

#include "attest/core/format.hpp"
#include "attest/core/recipe.hpp"
#include "attest/core/status.hpp"
#include "cpu/cpu_scheme.hpp"

namespace attest::kernels::cpu {
namespace {

TEST(CpuScheme, FloatConstantsAreTheFormatTable) {
  int checked = 0;
  for (FormatId id : all_format_ids()) {
    if (id == FormatId::int8 || id == FormatId::e8m0fnu || id == FormatId::f32) {
      EXPECT_THROW((void)float_fmt(id), Error);
      continue;
    }
    const FormatSpec& s = format_spec(id);
    const FloatFmt& f = float_fmt(id);
    SCOPED_TRACE(std::string(s.name));
    EXPECT_EQ(f.man, s.man_bits);
    EXPECT_EQ(f.emin, 1 - s.bias);
    EXPECT_EQ(f.max, s.max_finite);
    EXPECT_EQ(f.has_inf, s.has_inf);
    EXPECT_EQ(f.has_nan, s.has_nan);
    EXPECT_EQ(f.fnuz, s.fnuz);
    ++checked;
  }
  EXPECT_EQ(checked, 9);
}

TEST(CpuScheme, PlansOfTheNamedRecipes) {
  // f32 is the identity (the f32 recipe cpu.tiled declares), a head of the shared grammar.
  EXPECT_EQ(parse_scheme("f32").kind, Scheme::Kind::f32);
  EXPECT_THROW(parse_scheme("f32:per_tensor"), Error);
  const Scheme q = parse_scheme("int8:per_warp=sm90:scale=floor:apply=mul");
  EXPECT_EQ(q.kind, Scheme::Kind::int8);
  EXPECT_EQ(q.gran, Scheme::Gran::warp);
  EXPECT_TRUE(q.sm90 && q.apply_mul && !q.role_k);
  EXPECT_EQ(q.rule, Scheme::Rule::floor);
  const Scheme v = parse_scheme("fp8_e4m3fnuz:per_tensor:overflow=sat_hip");
  EXPECT_EQ(v.elem.max, 240.0);
  EXPECT_EQ(v.scale_max, 240.0f);
  EXPECT_EQ(v.sat, Sat::sat_hip);
  EXPECT_TRUE(v.apply_mul);
  const Scheme p = parse_scheme("mxfp4_e2m1fn:scale=aiter_hip_fp4:round=smaller");
  EXPECT_EQ(p.block, 32);
  EXPECT_EQ(p.e8m0, "aiter_hip_fp4");
  EXPECT_EQ(p.tie, Tie::smaller);
  EXPECT_EQ(p.sat, Sat::satfinite);
  EXPECT_TRUE(parse_scheme("mxint8").mx_int8);
  EXPECT_EQ(parse_scheme("bf16").sat, Sat::ieee);
  // Every named recipe's schemes have a plan.
  for (const auto& nr : named_recipes()) {
    const Recipe r = parse_recipe(nr.definition);
    for (const std::string* s : {&r.q, &r.k, &r.v}) EXPECT_NO_THROW((void)parse_scheme(*s)) << nr.name;
  }
}

TEST(CpuScheme, RefusesWhatTheGrammarRefuses) {
  // The CPU parser used to accept these (no duplicate, granularity or applicability checks).
  EXPECT_THROW(parse_scheme("int8:per_block=64:round=half:round=rne"), Error);
  EXPECT_THROW(parse_scheme("int8:round=half"), Error);
  EXPECT_THROW(parse_scheme("bf16:smooth=fp32"), Error);
  EXPECT_THROW(parse_scheme("mxfp4_e2m1fn:scale=nonsense"), Error);
}

}  // namespace
}  // namespace attest::kernels::cpu

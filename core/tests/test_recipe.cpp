#include <gtest/gtest.h>

#include <random>

#include "attest/core/recipe.hpp"
#include "attest/core/status.hpp"

namespace attest {
namespace {

TEST(Recipe, StringRoundTripsOverRandomRecipes) {
  std::mt19937_64 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const char* schemes[] = {"bf16", "fp16", "f32", "int8:per_block=128:scale=ieee:round=half", "fp8_e4m3fn:per_channel"};
  for (int i = 0; i < 3000; ++i) {
    Recipe r;
    r.q = parse_scheme(schemes[pick(5)]);
    r.k = parse_scheme(schemes[pick(5)]);
    r.v = parse_scheme(schemes[pick(5)]);
    r.p = kRecipeElemFormats[static_cast<std::size_t>(pick(7))];
    r.pscale = static_cast<PScale>(pick(3));
    r.exp2 = static_cast<Exp2Policy>(pick(3));
    r.rescale = static_cast<RescalePolicy>(pick(2));
    if (pick(2)) r.rescale_threshold = std::uniform_real_distribution<double>(0, 16)(rng);
    r.div = static_cast<DivisionOp>(pick(3));
    r.tile_q = 1 + pick(256);
    r.tile_kv = 1 + pick(256);
    r.out = kRecipeElemFormats[static_cast<std::size_t>(pick(7))];
    r.vscale = r.div != DivisionOp::ieee_div && pick(2) ? VScaleAt::rcp : VScaleAt::out;
    if (pick(3) == 0) r.p_mx = parse_scheme("mxfp4_e2m1fn:scale=aiter_hip_fp4:round=smaller");
    if (pick(2)) r.pv_acc = FormatId::fp16;
    const auto s = to_string(r);
    EXPECT_EQ(parse_recipe(s), r) << s;
  }
}

TEST(Recipe, NamedRecipesParseAndLabelThemselves) {
  for (const auto& n : named_recipes()) {
    const Recipe r = parse_recipe(n.name);
    EXPECT_EQ(r, parse_recipe(n.definition));
    EXPECT_EQ(recipe_label(r), n.name);
  }
}

TEST(Recipe, PrintsOnlyNonDefaults) {
  Recipe r;
  EXPECT_EQ(to_string(r), "q=bf16;k=bf16;v=bf16");
  r.exp2 = Exp2Policy::fa4;
  r.tile_kv = 128;
  EXPECT_EQ(to_string(r), "q=bf16;k=bf16;v=bf16;exp2=fa4;tile_kv=128");
}

TEST(Recipe, RejectsBadStrings) {
  EXPECT_THROW(parse_recipe("no_such_recipe"), Error);
  EXPECT_THROW(parse_recipe("q=bf16;k=bf16;v=bf16;exp2=fast"), Error);
  EXPECT_THROW(parse_recipe("q=bf16;k=bf16;v=bf16;tile_q=0"), Error);
  EXPECT_THROW(parse_recipe("q=bf16;q=fp16;k=bf16;v=bf16"), Error);
  EXPECT_THROW(parse_recipe("q=bf16;k=bf16;v=bf16;colour=red"), Error);
  EXPECT_THROW(parse_recipe("q=bf16;k=bf16;v=bf16;tile_q=12x"), Error);
  EXPECT_THROW(parse_recipe("q=bf16;k=bf16;v=bf16;vscale=rcp"), Error);  // ieee_div has no reciprocal
  EXPECT_THROW(parse_recipe("q=bf16;k=bf16;v=bf16;vscale=late"), Error);
  EXPECT_THROW(parse_recipe("q=bf16;k=bf16;v=bf16;p_mx="), Error);
  EXPECT_THROW(parse_recipe("q=bf16;k=bf16;v=bf16;pv_acc=bf16"), Error);  // f32 or fp16 only
  EXPECT_EQ(parse_recipe("q=bf16;k=bf16;v=bf16;pv_acc=fp16").pv_acc, FormatId::fp16);
}

TEST(Recipe, SchemeValuesMayContainColonsAndEquals) {
  const Recipe r = parse_recipe("q=int8:per_block=128:round=half;k=bf16;v=bf16;p=fp4_e2m1fn;div=ieee_rcp;vscale=rcp;"
                                "p_mx=mxfp4_e2m1fn:scale=floor");
  EXPECT_EQ(to_string(r.q), "int8:per_block=128:round=half");
  ASSERT_TRUE(r.p_mx.has_value());
  EXPECT_EQ(to_string(*r.p_mx), "mxfp4_e2m1fn");  // scale=floor is the default: canonical form
  EXPECT_EQ(r.vscale, VScaleAt::rcp);
  EXPECT_EQ(to_string(r), "q=int8:per_block=128:round=half;k=bf16;v=bf16;p=fp4_e2m1fn;div=ieee_rcp;vscale=rcp;"
                          "p_mx=mxfp4_e2m1fn");
}

TEST(Recipe, NamedRecipesCoverTheDesignList) {
  // DESIGN.md: bf16, fp16, sage int8-fp8 (per block, warp, thread), fp8-fp8 (OCP, FNUZ), the four
  // MX pairs, and the MX pairs with Hadamard rotation.
  for (const char* n : {"bf16", "fp16", "sage_int8_fp8_perblock", "sage_int8_fp8_perwarp", "sage_int8_fp8_perthread",
                        "fp8_fp8", "fp8_fp8_fnuz", "mxfp6_fp8", "mxfp4_fp8", "mxfp6_fp4", "mxfp4_fp4", "mxfp6_fp8_had",
                        "mxfp4_fp8_had", "mxfp6_fp4_had", "mxfp4_fp4_had"})
    EXPECT_NO_THROW(parse_recipe(n)) << n;
  for (const auto& n : named_recipes()) {
    EXPECT_FALSE(n.summary.empty()) << n.name;
    EXPECT_TRUE(parse_recipe(n.name).bitwise_capable()) << n.name;  // named recipes have an emulator contract
  }
}

}  // namespace
}  // namespace attest

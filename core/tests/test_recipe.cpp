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
    r.q = schemes[pick(5)];
    r.k = schemes[pick(5)];
    r.v = schemes[pick(5)];
    r.p = static_cast<ElemFormat>(pick(7));
    r.pscale = static_cast<PScale>(pick(3));
    r.exp2 = static_cast<Exp2Policy>(pick(3));
    r.rescale = static_cast<RescalePolicy>(pick(2));
    if (pick(2)) r.rescale_threshold = std::uniform_real_distribution<double>(0, 16)(rng);
    r.div = static_cast<DivisionOp>(pick(3));
    r.tile_q = 1 + pick(256);
    r.tile_kv = 1 + pick(256);
    r.out = static_cast<ElemFormat>(pick(7));
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
}

}  // namespace
}  // namespace attest

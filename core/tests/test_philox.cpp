#include <gtest/gtest.h>

#include "attest/core/philox.hpp"

namespace attest {
namespace {

// Known-answer vectors of Philox4x32-10 from Random123's kat_vectors file (the reference
// implementation by the algorithm's authors): zero, all-ones, and digits of pi.
struct Kat {
  Philox4x32::Counter ctr;
  Philox4x32::Key key;
  Philox4x32::Counter expect;
};

TEST(Philox, Random123KnownAnswers) {
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const auto& k : kats) EXPECT_EQ(Philox4x32::generate(k.ctr, k.key), k.expect);
}

TEST(Philox, ElementsAreIndependentOfOrder) {
  // Generating element 1000 directly equals generating it after others: no hidden state.
  const auto direct = philox_words(42, 3, 1000);
  for (std::uint64_t i = 0; i < 1000; ++i) (void)philox_words(42, 3, i);
  EXPECT_EQ(philox_words(42, 3, 1000), direct);
  EXPECT_NE(philox_words(42, 3, 1000), philox_words(42, 4, 1000));
  EXPECT_NE(philox_words(42, 3, 1000), philox_words(43, 3, 1000));
  EXPECT_NE(philox_words(42, 3, 1000), philox_words(42, 3, 1000 + (1ull << 32)));
}

TEST(Philox, IsConstexpr) {
  constexpr auto w = Philox4x32::generate({0, 0, 0, 0}, {0, 0});
  static_assert(w[0] == 0x6627e8d5u, "Philox must be usable at compile time");
  EXPECT_EQ(w[0], 0x6627e8d5u);
}

}  // namespace
}  // namespace attest

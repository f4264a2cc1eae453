// rcp.approx.ftz.f32 of sm_90 from the measured table. The table is the same data file the
// emulator reads (a measurement, not code): 2^23 signed bytes, entry i = bits(rcp(x)) -
// bits(RN(1/x)) for x = 1 + i * 2^-23. The loader here is independent of reference/.
#include <zlib.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "attest/core/status.hpp"
#include "cpu/cpu_numerics.hpp"

namespace attest::kernels::cpu {
namespace {

std::vector<std::int8_t> load_table() {
  std::string path = ATTEST_KERNELS_RCP_TABLE;
  if (const char* env = std::getenv("ATTEST_RCP_SM90_TABLE"); env != nullptr && *env != '\0') path = env;
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw Error("rcp_sm90 table '" + path + "' cannot be opened (set ATTEST_RCP_SM90_TABLE)");
  std::vector<std::int8_t> t(std::size_t{1} << 23);
  std::size_t got = 0;
  while (got < t.size()) {
    const int n = gzread(f, t.data() + got, static_cast<unsigned>(t.size() - got));
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  char extra = 0;
  const bool longer = gzread(f, &extra, 1) > 0;
  gzclose(f);
  if (got != t.size() || longer)
    throw Error("rcp_sm90 table '" + path + "' does not hold exactly 2^23 entries");
  return t;
}

const std::vector<std::int8_t>& table() {
  static std::once_flag once;
  static std::vector<std::int8_t> t;
  std::call_once(once, [] { t = load_table(); });
  return t;
}

}  // namespace

float rcp_sm90(float x) {
  const std::uint32_t sign = bits_of(x) & 0x80000000u;
  const float a = std::fabs(x);
  if (std::isnan(a)) return x;
  // ftz: subnormal inputs are zero, so their reciprocal is Inf; results below the smallest
  // normal flush to zero.
  if (a < std::numeric_limits<float>::min()) return from_bits(sign | 0x7F800000u);
  if (std::isinf(a)) return from_bits(sign);
  // 1/a = 2^-e * (1/m) with m in [1, 2): the correction depends only on the mantissa bits, and
  // adding it to the bits of RN(1/a) stays exact across the binade edge (bits are monotone).
  const float rn = 1.0f / a;
  if (rn < std::numeric_limits<float>::min()) return from_bits(sign);
  const auto d = static_cast<std::int32_t>(table()[man_field(a)]);
  return from_bits(sign | static_cast<std::uint32_t>(static_cast<std::int32_t>(bits_of(rn)) + d));
}

}  // namespace attest::kernels::cpu

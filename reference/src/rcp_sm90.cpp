// Exact emulation of sm_90 `rcp.approx.ftz.f32` from the measured table
// reference/data/rcp_sm90_ulpdiff.i8.gz (README.md there gives its provenance): 2^23 int8
// entries, entry[m] = bits(rcp(x)) - bits(RN(1/x)) for x in [1, 2) with mantissa field m.
// The table is embedded in the library (assembler .incbin), so a binary copied to another host
// needs no data file, and inflated with zlib on first use.
#include <zlib.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "attest/core/status.hpp"
#include "attest/reference/emulate.hpp"

#ifndef ATTEST_RCP_SM90_TABLE_GZ
#error "ATTEST_RCP_SM90_TABLE_GZ must name the table file (reference/CMakeLists.txt sets it)"
#endif

// The .gz bytes between two hidden symbols in read-only data.
asm(".pushsection .rodata\n"
    ".balign 16\n"
    ".globl attest_rcp_sm90_gz_begin\n.hidden attest_rcp_sm90_gz_begin\n"
    "attest_rcp_sm90_gz_begin:\n"
    ".incbin \"" ATTEST_RCP_SM90_TABLE_GZ "\"\n"
    ".globl attest_rcp_sm90_gz_end\n.hidden attest_rcp_sm90_gz_end\n"
    "attest_rcp_sm90_gz_end:\n"
    ".popsection\n");
extern "C" {
__attribute__((visibility("hidden"))) extern const unsigned char attest_rcp_sm90_gz_begin[];
__attribute__((visibility("hidden"))) extern const unsigned char attest_rcp_sm90_gz_end[];
}

namespace attest::ref {
namespace {

constexpr std::size_t kEntries = std::size_t{1} << 23;

std::vector<std::int8_t> inflate_table() {
  std::vector<std::int8_t> table(kEntries);
  z_stream zs{};
  // 16 + MAX_WBITS: expect a gzip header and trailer (the trailer's CRC-32 is checked by zlib).
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw Error("rcp_sm90 table: zlib inflateInit2 failed");
  zs.next_in = const_cast<Bytef*>(attest_rcp_sm90_gz_begin);
  zs.avail_in = static_cast<uInt>(attest_rcp_sm90_gz_end - attest_rcp_sm90_gz_begin);
  zs.next_out = reinterpret_cast<Bytef*>(table.data());
  zs.avail_out = static_cast<uInt>(table.size());
  const int rc = inflate(&zs, Z_FINISH);
  const auto produced = zs.total_out;
  inflateEnd(&zs);
  if (rc != Z_STREAM_END || produced != kEntries)
    throw Error("rcp_sm90 table: embedded gzip stream is corrupt or not 2^23 bytes (zlib rc " +
                std::to_string(rc) + ", " + std::to_string(produced) + " bytes)");
  return table;
}

}  // namespace

std::span<const std::int8_t> rcp_sm90_table() {
  static const std::vector<std::int8_t> table = inflate_table();
  return table;
}

std::size_t rcp_sm90_table_gz_size() {
  return static_cast<std::size_t>(attest_rcp_sm90_gz_end - attest_rcp_sm90_gz_begin);
}

float rcp_sm90(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = u & 0x80000000u;
  const std::uint32_t e = (u >> 23) & 0xFFu;
  const std::uint32_t m = u & 0x7FFFFFu;
  if (e == 0xFF) {
    if (m != 0) return std::numeric_limits<float>::quiet_NaN();
    return std::bit_cast<float>(sign);  // 1/+-inf = +-0
  }
  if (e == 0) return std::bit_cast<float>(sign | 0x7F800000u);  // ftz: subnormal inputs are +-0
  // 1/x = 2^-(e-127) / 1.m. The table holds the hardware's result for 1.m; the power of two
  // only moves the exponent (the instruction depends on the mantissa alone, FORMATS.md).
  const float r = 1.0f / std::bit_cast<float>(0x3F800000u | m);  // IEEE: RN(1/1.m) in (1/2, 1]
  const std::uint32_t rb = std::bit_cast<std::uint32_t>(r) + static_cast<std::uint32_t>(
                                                                 static_cast<std::int32_t>(rcp_sm90_table()[m]));
  const int er = static_cast<int>((rb >> 23) & 0xFFu);  // 126 or 127
  const int ne = er - (static_cast<int>(e) - 127);      // <= 127 + 126: never overflows
  if (ne <= 0) return std::bit_cast<float>(sign);       // ftz: a subnormal result is flushed
  return std::bit_cast<float>(sign | (static_cast<std::uint32_t>(ne) << 23) | (rb & 0x7FFFFFu));
}

}  // namespace attest::ref

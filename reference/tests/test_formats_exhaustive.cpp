// Every float32 bit pattern (all 2^32) through every codec's default encoder (Rounding::rne,
// Overflow::ieee: ml_dtypes' non-saturating astype), against ml_dtypes: the per-chunk zlib crc32
// of ml_dtypes' codes in oracles/formats/exhaustive_crc32.json (made by
// oracles/make_codec_digests.py, which says how codes are laid out and which class is
// canonicalised before hashing). Label `slow`. No Python is needed here.
//
// On a mismatch the test names the format, the chunk and its input range, prints attest's first
// codes of the chunk, and writes all of attest's codes of that chunk to a file that
// `make_codec_digests.py --chunk FORMAT K --compare FILE` diffs against ml_dtypes.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "attest/reference/formats.hpp"

namespace attest::ref {
namespace {

namespace fs = std::filesystem;

constexpr int kChunkBits = 24;
constexpr std::uint32_t kChunk = 1u << kChunkBits;
constexpr std::uint32_t kChunks = 1u << (32 - kChunkBits);
// Fixed, not the machine's core count: the digests do not depend on it, the runtime does.
constexpr int kThreads = 2;

const nlohmann::json& digests() {
  static const nlohmann::json j = [] {
    const fs::path p = fs::path(ATTEST_FORMAT_ORACLE_DIR) / "exhaustive_crc32.json";
    std::ifstream in(p);
    if (!in) throw std::runtime_error("cannot read " + p.string());
    return nlohmann::json::parse(in);
  }();
  return j;
}

// One thread's buffers, reused for every chunk (fresh 64 MiB per chunk cost page faults).
struct Work {
  std::vector<float> x = std::vector<float>(kChunk);
  std::vector<std::uint16_t> c16 = std::vector<std::uint16_t>(kChunk);
  std::vector<unsigned char> bytes = std::vector<unsigned char>(2 * std::size_t{kChunk});
};

// attest's codes of chunk k as the bytes ml_dtypes' were hashed from: one byte per code, or
// uint16 little-endian for bf16/fp16, whose NaN codes are hashed as 0x7E00 | sign
// (make_codec_digests.py, CANONICAL). Returns the bytes (a view into w).
std::span<const unsigned char> chunk_bytes(FormatId f, std::uint32_t k, Work& w) {
  for (std::uint32_t i = 0; i < kChunk; ++i) w.x[i] = std::bit_cast<float>((k << kChunkBits) | i);
  if (format_info(f).bits <= 8) {
    std::span<std::uint8_t> b(w.bytes.data(), kChunk);
    encode_f32(f, w.x, b);
    return b;
  }
  encode_f32(f, w.x, w.c16);
  if (f == FormatId::fp16)
    for (auto& v : w.c16)
      if ((v & 0x7FFF) > 0x7C00) v = static_cast<std::uint16_t>((v & 0x8000) | 0x7E00);
  if constexpr (std::endian::native == std::endian::little)
    return {reinterpret_cast<const unsigned char*>(w.c16.data()), 2 * std::size_t{kChunk}};
  for (std::uint32_t i = 0; i < kChunk; ++i) {  // little-endian, whatever the host
    w.bytes[2 * i] = static_cast<unsigned char>(w.c16[i] & 0xFF);
    w.bytes[2 * i + 1] = static_cast<unsigned char>(w.c16[i] >> 8);
  }
  return w.bytes;
}

std::uint32_t crc(std::span<const unsigned char> b) {
  uLong c = crc32(0L, Z_NULL, 0);
  for (std::size_t at = 0; at < b.size();) {  // crc32's length is a uInt
    const auto step = static_cast<uInt>(std::min<std::size_t>(b.size() - at, 1u << 30));
    c = crc32(c, b.data() + at, step);
    at += step;
  }
  return static_cast<std::uint32_t>(c);
}

class ExhaustiveCodec : public ::testing::TestWithParam<FormatId> {};

TEST_P(ExhaustiveCodec, AllFloat32MatchMlDtypes) {
  const FormatId f = GetParam();
  const std::string name(format_name(f));
  const nlohmann::json& want = digests().at("crc32").at(name);
  ASSERT_EQ(want.size(), kChunks) << name;
  std::vector<std::uint32_t> got(kChunks);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      Work w;
      for (std::uint32_t k = static_cast<std::uint32_t>(t); k < kChunks; k += kThreads) got[k] = crc(chunk_bytes(f, k, w));
    });
  }
  for (auto& th : pool) th.join();
  int bad = 0;
  for (std::uint32_t k = 0; k < kChunks; ++k) {
    if (got[k] == want[k].get<std::uint32_t>()) continue;
    if (++bad > 4) continue;
    Work w;
    const std::span<const unsigned char> b = chunk_bytes(f, k, w);
    const fs::path dump = fs::temp_directory_path() / ("attest_codes_" + name + "_chunk" + std::to_string(k) + ".bin");
    std::ofstream(dump, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    const int width = format_info(f).bits > 8 ? 2 : 1;
    std::string first;
    for (int i = 0; i < 8; ++i) {
      char s[48];
      const unsigned code = width == 2 ? b[2 * i] | (b[2 * i + 1] << 8) : b[i];
      std::snprintf(s, sizeof s, " 0x%08X->0x%0*X", (k << kChunkBits) | static_cast<unsigned>(i), 2 * width, code);
      first += s;
    }
    char range[64];
    std::snprintf(range, sizeof range, "0x%08X..0x%08X", k << kChunkBits, (k << kChunkBits) | (kChunk - 1));
    ADD_FAILURE() << name << " chunk " << k << " (input bits " << range << "): crc32 " << got[k] << ", ml_dtypes "
                  << want[k].get<std::uint32_t>() << "; attest's first codes:" << first
                  << "\n  all of attest's codes of the chunk: " << dump.string()
                  << "\n  diff against ml_dtypes: python3 reference/oracles/make_codec_digests.py --chunk " << name << " "
                  << k << " --compare " << dump.string();
  }
  EXPECT_EQ(bad, 0) << name << ": " << bad << " of " << kChunks << " chunks differ from ml_dtypes "
                    << digests().at("ml_dtypes").get<std::string>();
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, ExhaustiveCodec, ::testing::ValuesIn(all_formats().begin(), all_formats().end()),
                         [](const ::testing::TestParamInfo<FormatId>& i) { return std::string(format_name(i.param)); });

TEST(ExhaustiveCodecDigests, CoverEveryCodec) {
  for (FormatId f : all_formats()) EXPECT_TRUE(digests().at("crc32").contains(std::string(format_name(f)))) << format_name(f);
  EXPECT_EQ(digests().at("chunk_bits").get<int>(), kChunkBits);
}

}  // namespace
}  // namespace attest::ref

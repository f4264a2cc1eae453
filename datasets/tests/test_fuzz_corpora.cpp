// Replays the committed fuzz corpora (datasets/fuzz/corpus/<parser>/, seeds plus whatever
// scripts/fuzz --merge kept) through the parsers as ordinary tests: every input is either read
// or refused with an attest::Error naming the input; anything else (another exception, a crash,
// an ASan/UBSan report in the sanitizer build) fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "attest/core/status.hpp"
#include "attest/datasets/npy.hpp"
#include "attest/datasets/safetensors.hpp"

namespace attest::datasets {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> corpus(const std::string& parser) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(ATTEST_FUZZ_CORPORA) / parser))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

template <class Parse>
void replay(const std::string& parser, Parse parse) {
  const auto files = corpus(parser);
  ASSERT_GE(files.size(), 8u) << "corpus " << parser << " is missing or nearly empty";
  int accepted = 0, refused = 0;
  for (const auto& f : files) {
    const std::string bytes = slurp(f);
    const std::string name = f.filename().string();
    try {
      parse(std::as_bytes(std::span(bytes.data(), bytes.size())), name);
      ++accepted;
    } catch (const Error& e) {
      ++refused;
      EXPECT_EQ(std::string(e.what()).rfind(name + ": ", 0), 0u) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << ": not an attest::Error: " << e.what();
    }
  }
  // Both branches must be exercised, or the corpus tests less than it seems.
  EXPECT_GT(accepted, 0) << parser;
  EXPECT_GT(refused, 0) << parser;
}

TEST(FuzzCorpus, Npy) {
  replay("npy", [](std::span<const std::byte> b, const std::string& n) { (void)decode_npy(b, n); });
}

TEST(FuzzCorpus, Safetensors) {
  replay("safetensors", [](std::span<const std::byte> b, const std::string& n) { (void)decode_safetensors(b, n); });
}

}  // namespace
}  // namespace attest::datasets

#include "attest/conformance/case.hpp"

#include <charconv>
#include <vector>

#include "attest/core/status.hpp"

namespace attest::conformance {
namespace {

std::vector<std::string_view> split_ws(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    std::size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\t') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::string base(const Case& c) {
  return "kernel=" + c.kernel + " recipe=" + recipe_label(c.recipe) + " problem=" + to_string(c.problem) +
         " dist=" + std::string(datasets::distribution_name(c.dist)) + " seed=" + std::to_string(c.seed);
}

}  // namespace

std::string to_string(const Case& c) { return c.check.empty() ? base(c) : base(c) + " check=" + c.check; }

std::string group_key(const Case& c) { return base(c); }

std::string repro_line(const Case& c) { return "attest run '" + to_string(c) + "'"; }

Case parse_case(std::string_view text) {
  // A repro line pasted whole (attest run '...') is accepted too.
  if (auto q = text.find('\''); q != std::string_view::npos) {
    const auto e = text.rfind('\'');
    if (e == q) throw Error("case '" + std::string(text) + "': unbalanced quote");
    text = text.substr(q + 1, e - q - 1);
  }
  Case c;
  bool have_kernel = false, have_recipe = false, have_problem = false, have_dist = false, have_seed = false;
  for (auto tok : split_ws(text)) {
    const auto eq = tok.find('=');
    if (eq == std::string_view::npos)
      throw Error("case: field '" + std::string(tok) + "' needs key=value (keys: kernel recipe problem dist seed check)");
    const auto key = tok.substr(0, eq), value = tok.substr(eq + 1);
    if (value.empty()) throw Error("case: field '" + std::string(key) + "' is empty");
    auto once = [&](bool& seen) {
      if (seen) throw Error("case: field '" + std::string(key) + "' given twice");
      seen = true;
    };
    if (key == "kernel") {
      once(have_kernel);
      c.kernel = value;
    } else if (key == "recipe") {
      once(have_recipe);
      c.recipe = parse_recipe(value);
    } else if (key == "problem") {
      once(have_problem);
      c.problem = parse_problem(value);
    } else if (key == "dist") {
      once(have_dist);
      c.dist = datasets::parse_distribution(value);
    } else if (key == "seed") {
      once(have_seed);
      std::uint64_t s = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), s);
      if (ec != std::errc() || p != value.data() + value.size())
        throw Error("case: seed '" + std::string(value) + "' is not a non-negative integer");
      c.seed = s;
    } else if (key == "check") {
      if (!c.check.empty()) throw Error("case: field 'check' given twice");
      c.check = value;
    } else {
      throw Error("case: unknown field '" + std::string(key) + "' (valid: kernel recipe problem dist seed check)");
    }
  }
  const char* missing = !have_kernel ? "kernel" : !have_recipe ? "recipe" : !have_problem ? "problem"
                        : !have_dist ? "dist" : !have_seed ? "seed" : nullptr;
  if (missing) throw Error("case '" + std::string(text) + "': field '" + missing + "' is missing");
  return c;
}

}  // namespace attest::conformance

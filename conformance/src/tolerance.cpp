#include "attest/conformance/tolerance.hpp"

#include <fnmatch.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "attest/conformance/verdict.hpp"
#include "attest/core/status.hpp"
#include "embedded.hpp"

namespace attest::conformance {
namespace {

const std::vector<std::string>& known_metrics() {
  static const std::vector<std::string> k{"max_abs", "mean_abs", "rel_l1", "rel_l2", "rmse", "lse_max_abs", "lse_mean_abs"};
  return k;
}

bool glob(const std::string& pattern, std::string_view s) {
  return ::fnmatch(pattern.c_str(), std::string(s).c_str(), 0) == 0;
}

double number(const nlohmann::json& j, const std::string& where) {
  if (!j.is_number()) throw Error(where + " must be a number");
  const double v = j.get<double>();
  if (!std::isfinite(v) || v < 0) throw Error(where + " must be finite and >= 0");
  return v;
}

}  // namespace

MetricSet metric_set(const metrics::Comparison& out, const metrics::Comparison* lse) {
  MetricSet m{{"max_abs", out.max_abs}, {"mean_abs", out.mean_abs}, {"rel_l1", out.rel_l1},
              {"rel_l2", out.rel_l2},   {"rmse", out.rmse},         {"cosine", out.cosine}};
  if (lse) {
    m["lse_max_abs"] = lse->max_abs;
    m["lse_mean_abs"] = lse->mean_abs;
  }
  return m;
}

const ToleranceTable& ToleranceTable::builtin() {
  static const ToleranceTable t = [] {
    auto b = parse(embedded::find("tolerances.json"), "built-in tolerances.json");
    b.builtin_ = true;
    return b;
  }();
  return t;
}

ToleranceTable ToleranceTable::load(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw Error("tolerance table '" + file.string() + "': cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), file.string());
}

ToleranceTable ToleranceTable::parse(std::string_view text, std::string_view source) {
  const std::string src(source);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error("tolerance table '" + src + "': " + e.what());
  }
  const nlohmann::json& rows = doc.is_object() ? doc.value("rows", nlohmann::json()) : doc;
  if (!rows.is_array() || rows.empty()) throw Error("tolerance table '" + src + "': needs a non-empty array \"rows\"");
  ToleranceTable t;
  t.source_ = src;
  // FNV-1a 64 of the exact text: an identity for reports, not security (no hash library among
  // the dependencies; the built-in table hashes the same whichever build embeds it).
  std::uint64_t h = 1469598103934665603ull;
  for (const unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  t.hash_ = fmt::format("fnv1a64:{:016x}", h);
  int idx = 0;
  for (const auto& r : rows) {
    const std::string where = fmt::format("tolerance table '{}' row {}", src, idx);
    if (!r.is_object()) throw Error(where + ": not an object");
    static const std::vector<std::string> keys{"recipe", "check", "alpha", "beta", "eps", "cosine_min",
                                               "rel_l1_max", "bad_fraction", "nan_policy", "reason"};
    for (const auto& [k, v] : r.items())
      if (std::find(keys.begin(), keys.end(), k) == keys.end())
        throw Error(where + ": unknown key '" + k + "' (valid: recipe check alpha beta eps cosine_min rel_l1_max bad_fraction nan_policy reason)");
    ToleranceRow row;
    row.index = idx;
    if (!r.contains("recipe") || !r.contains("check") || !r.contains("reason"))
      throw Error(where + ": needs \"recipe\", \"check\" and \"reason\"");
    row.recipe = r.at("recipe").get<std::string>();
    row.check = r.at("check").get<std::string>();
    row.reason = r.at("reason").get<std::string>();
    if (row.reason.size() < 10) throw Error(where + ": \"reason\" must say why these numbers");
    if (r.contains("eps")) {
      const auto& eps = r.at("eps");
      if (!eps.is_object()) throw Error(where + ": \"eps\" must map metric names to numbers");
      for (const auto& [m, v] : eps.items()) {
        if (std::find(known_metrics().begin(), known_metrics().end(), m) == known_metrics().end())
          throw Error(where + ": unknown metric '" + m + "' (valid: max_abs mean_abs rel_l1 rel_l2 rmse lse_max_abs lse_mean_abs)");
        Bound b;
        b.eps = number(v, where + " eps." + m);
        for (const char* coef : {"alpha", "beta"}) {
          if (!r.contains(coef)) continue;
          const auto& c = r.at(coef);
          const double val = c.is_object() ? (c.contains(m) ? number(c.at(m), where + " " + coef + "." + m) : 0.0)
                                           : number(c, where + " " + coef);
          (std::string(coef) == "alpha" ? b.alpha : b.beta) = val;
        }
        row.bounds[m] = b;
      }
    }
    if (r.contains("cosine_min")) row.cosine_min = number(r.at("cosine_min"), where + " cosine_min");
    if (r.contains("rel_l1_max")) row.rel_l1_max = number(r.at("rel_l1_max"), where + " rel_l1_max");
    if (r.contains("bad_fraction")) {
      const auto& b = r.at("bad_fraction");
      if (!b.is_object() || !b.contains("atol") || !b.contains("rtol") || !b.contains("max"))
        throw Error(where + ": \"bad_fraction\" needs atol, rtol and max");
      row.bad_fraction = BadFraction{number(b.at("atol"), where + " bad_fraction.atol"),
                                     number(b.at("rtol"), where + " bad_fraction.rtol"),
                                     number(b.at("max"), where + " bad_fraction.max")};
    }
    if (r.contains("nan_policy")) {
      const auto p = r.at("nan_policy").get<std::string>();
      if (p == "rows") row.nan_policy = NanPolicy::rows;
      else if (p == "emulator") row.nan_policy = NanPolicy::emulator;
      else throw Error(where + ": nan_policy '" + p + "' unknown (valid: rows, emulator)");
    }
    t.rows_.push_back(std::move(row));
    ++idx;
  }
  return t;
}

const ToleranceRow& ToleranceTable::lookup(std::string_view recipe_label, std::string_view check) const {
  for (const auto& r : rows_)
    if (glob(r.recipe, recipe_label) && glob(r.check, check)) return r;
  throw Error("tolerance table: no row for recipe '" + std::string(recipe_label) + "' and check '" +
              std::string(check) + "'");
}

Judgement judge(const ToleranceRow& row, const MetricSet& measured, const MetricSet& budget, const MetricSet& floor) {
  Judgement j;
  j.figures["row"] = row.index;
  j.figures["row_reason"] = row.reason;
  nlohmann::json per = nlohmann::json::object(), skipped = nlohmann::json::array();
  auto fail = [&](std::string why) {
    if (j.pass) j.reason = std::move(why);
    j.pass = false;
  };
  auto get = [](const MetricSet& s, const std::string& m) {
    auto it = s.find(m);
    return it == s.end() ? 0.0 : it->second;
  };
  for (const auto& [m, b] : row.bounds) {
    auto it = measured.find(m);
    if (it == measured.end()) {
      skipped.push_back(m);
      continue;
    }
    const double bud = get(budget, m), flo = get(floor, m);
    const double bound = b.alpha * bud + b.beta * flo + b.eps;
    // NaN compares false: a NaN measurement (or bound) never passes.
    const bool ok = it->second <= bound;
    per[m] = {{"measured", json_number(it->second)}, {"budget", json_number(bud)}, {"floor", json_number(flo)},
              {"alpha", b.alpha}, {"beta", b.beta}, {"eps", b.eps}, {"bound", json_number(bound)}, {"ok", ok}};
    if (!ok)
      fail(fmt::format("{} {:.4g} > bound {:.4g} (= {:g} x budget {:.4g} + {:g} x floor {:.4g} + eps {:g})", m,
                       it->second, bound, b.alpha, bud, b.beta, flo, b.eps));
  }
  auto absolute = [&](const char* name, double limit, bool lower_is_better) {
    auto it = measured.find(name);
    if (it == measured.end()) {
      skipped.push_back(name);
      return;
    }
    const bool ok = lower_is_better ? it->second <= limit : it->second >= limit;
    per[name] = {{"measured", json_number(it->second)}, {lower_is_better ? "max" : "min", limit}, {"ok", ok}};
    if (!ok) fail(fmt::format("{} {:.6g} {} {:.6g}", name, it->second, lower_is_better ? ">" : "<", limit));
  };
  if (row.cosine_min) absolute("cosine", *row.cosine_min, false);
  if (row.rel_l1_max) absolute("rel_l1", *row.rel_l1_max, true);
  if (row.bad_fraction) absolute("bad_fraction", row.bad_fraction->max, true);
  j.figures["metrics"] = per;
  if (!skipped.empty()) j.figures["skipped"] = skipped;
  return j;
}

double bad_fraction(const Tensor& test, const Tensor& ref, const BadFraction& bf) {
  if (test.shape() != ref.shape())
    throw Error("bad_fraction: shapes " + shape_string(test.shape()) + " and " + shape_string(ref.shape()) + " differ");
  const std::int64_t n = test.numel();
  if (n == 0) return 0;
  std::int64_t bad = 0;
  Shape idx(test.shape().size(), 0);
  for (std::int64_t e = 0; e < n; ++e) {
    const double t = test.get(idx), r = ref.get(idx);
    if (std::isfinite(t) && std::isfinite(r)) {
      const double d = std::fabs(t - r);
      if (d > bf.atol && d > bf.rtol * std::fabs(r)) ++bad;
    } else if (!(std::isnan(t) && std::isnan(r)) && t != r) {
      ++bad;
    }
    for (int d = static_cast<int>(idx.size()) - 1; d >= 0; --d) {
      if (++idx[static_cast<std::size_t>(d)] < test.shape()[static_cast<std::size_t>(d)]) break;
      idx[static_cast<std::size_t>(d)] = 0;
    }
  }
  return static_cast<double>(bad) / static_cast<double>(n);
}

}  // namespace attest::conformance

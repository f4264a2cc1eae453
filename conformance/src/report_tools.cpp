#include "attest/conformance/report_tools.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "attest/conformance/bench.hpp"
#include "attest/conformance/gate.hpp"
#include "attest/conformance/verdict.hpp"
#include "attest/core/report/table.hpp"
#include "attest/core/status.hpp"

namespace attest::conformance::report {
namespace {

using nlohmann::json;
using ::attest::report::Align;
using ::attest::report::Cell;
using ::attest::report::Table;

std::string str(const json& j, const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(); }

/// A figure value: numbers, and the gate's "nan"/"inf"/"-inf" strings.
bool figure_value(const json& v, double& out) {
  if (v.is_number()) {
    out = v.get<double>();
    return true;
  }
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    if (s == "nan") out = std::nan("");
    else if (s == "inf") out = INFINITY;
    else if (s == "-inf") out = -INFINITY;
    else return false;
    return true;
  }
  return false;
}

void validate_gate_result(const json& r, const std::string& where) {
  try {
    (void)result_from_json(r);
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}

void validate_bench_row(const json& r, const std::string& where) {
  if (!r.is_object()) throw Error(where + ": not an object");
  for (const char* k : {"case", "type", "kernel", "status"})
    if (!r.contains(k) || !r[k].is_string()) throw Error(where + ": field '" + k + "' missing or not a string");
  if (str(r, "status") != "timed") return;
  for (const char* k : {"median_ms", "spread", "q1_ms", "q3_ms"})
    if (!r.contains(k) || !r[k].is_number()) throw Error(where + ": timed row without a numeric '" + k + "'");
  if (!(r["median_ms"].get<double>() > 0)) throw Error(where + ": median_ms must be > 0");
}

void validate(Doc& d, const std::string& origin) {
  auto& j = d.json;
  if (!j.contains("results") || !j["results"].is_array()) throw Error(origin + ": no 'results' array");
  if (!j.contains("meta")) j["meta"] = json::object();
  if (!j["meta"].is_object()) throw Error(origin + ": 'meta' is not an object");
  std::size_t i = 0;
  for (const auto& r : j["results"]) {
    const std::string where = fmt::format("{}: result {}", origin, i++);
    if (d.kind == Kind::gate) validate_gate_result(r, where);
    else if (d.kind == Kind::bench) validate_bench_row(r, where);
  }
}

/// Group of a gate result: the unit the gate shards.
std::string group_of(const json& r) {
  return fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}", str(r, "kernel"), str(r, "recipe"), str(r, "problem"), str(r, "dist"),
                     r.value("seed", std::uint64_t{0}));
}

/// A result without its timing, for comparing duplicates.
json sans_time(json r) {
  r.erase("seconds");
  return r;
}

std::string apply_pairs(std::string c, const DiffOptions& o) {
  for (const auto& [base, cand] : o.pairs) {
    const std::string from = "kernel=" + cand + " ", to = "kernel=" + base + " ";
    if (c.rfind(from, 0) == 0) return to + c.substr(from.size());
  }
  return c;
}

std::string g(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.4g}", v);
}
std::string ratio_str(double r) { return std::isfinite(r) ? fmt::format("{:.3f}", r) : g(r); }

}  // namespace

std::string_view kind_name(Kind k) { return k == Kind::gate ? "gate" : k == Kind::bench ? "bench" : "diff"; }

Doc parse(const std::string& text, const std::string& origin) {
  Doc d;
  d.path = origin;
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) throw Error(origin + ": empty file");
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error&) {
    // Not one JSON document: a JSONL journal, one result per line.
    json results = json::array();
    std::istringstream in(text);
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      try {
        auto r = json::parse(line);
        // `gate --isolate` annotations (worker lines, in-flight markers) are not results.
        if (r.is_object() && !r.contains("case") && (r.contains("inflight") || r.contains("worker") || r.contains("worker_end")))
          continue;
        results.push_back(std::move(r));
      } catch (const json::parse_error& e) {
        throw Error(fmt::format("{}:{}: not JSON ({})", origin, n, e.what()));
      }
    }
    d.kind = Kind::gate;
    d.json = {{"meta", json::object()}, {"results", results}, {"journal", true}};
    validate(d, origin);
    return d;
  }
  if (j.is_object() && j.contains("case") && j.contains("verdict")) {
    // A journal with a single line.
    d.kind = Kind::gate;
    d.json = {{"meta", json::object()}, {"results", json::array({j})}, {"journal", true}};
  } else if (!j.is_object()) {
    throw Error(origin + ": not a report (expected a JSON object)");
  } else if (str(j, "kind") == "bench") {
    d.kind = Kind::bench;
    d.json = std::move(j);
  } else if (str(j, "kind") == "diff") {
    d.kind = Kind::diff;
    d.json = std::move(j);
    if (!d.json.contains("meta")) d.json["meta"] = json::object();
    if (!d.json.contains("results")) d.json["results"] = json::array();
    return d;
  } else if (j.contains("results") && j.contains("counts")) {
    d.kind = Kind::gate;
    d.json = std::move(j);
  } else {
    throw Error(origin + ": not a gate, bench or diff report (no 'kind' and no 'results'/'counts')");
  }
  validate(d, origin);
  return d;
}

Doc load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

// ---- merge ----

namespace {

json gate_json(const json& meta, const json& results, const json& errors, double seconds) {
  GateReport rep;
  rep.meta = meta;
  for (const auto& e : errors) rep.errors.push_back(e.get<std::string>());
  for (const auto& r : results) rep.results.push_back(result_from_json(r));
  rep.seconds = seconds;
  json j = json_report(rep);
  // json_report re-serialises every result; keep the inputs' exact records (figures included).
  j["results"] = results;
  return j;
}

}  // namespace

json merge(const std::vector<Doc>& docs) {
  if (docs.empty()) throw Error("report merge: no inputs");
  const Kind kind = docs.front().kind;
  for (const auto& d : docs) {
    if (d.kind == Kind::diff) throw Error(d.path + ": a diff report cannot be merged");
    if (d.kind != kind)
      throw Error(d.path + ": is a " + std::string(kind_name(d.kind)) + " report, " + docs.front().path + " a " +
                  std::string(kind_name(kind)) + " report");
  }
  json merged_from = json::array();
  for (const auto& d : docs)
    merged_from.push_back({{"path", d.path}, {"shard", str(d.json["meta"], "shard")}, {"host", str(d.json["meta"], "host")}});

  // Dedup by case: identical records (timing aside) kept once, conflicting ones an error.
  std::map<std::string, std::pair<const json*, std::string>> seen;
  auto admit = [&](const json& r, const std::string& path) {
    const std::string c = str(r, "case");
    auto [it, fresh] = seen.emplace(c, std::make_pair(&r, path));
    if (fresh) return true;
    const bool same = kind == Kind::gate ? sans_time(*it->second.first) == sans_time(r) : false;
    if (!same) throw Error("report merge: case '" + c + "' is in " + it->second.second + " and " + path + " with different results");
    return false;
  };

  json results = json::array();
  bool sharded = kind == Kind::gate;
  for (const auto& d : docs) sharded = sharded && !str(d.json["meta"], "shard").empty() && !d.json.value("journal", false);
  if (sharded) {
    std::vector<Shard> shards;
    for (const auto& d : docs) shards.push_back(parse_shard(str(d.json["meta"], "shard")));
    const int n = shards.front().count;
    std::vector<const Doc*> by_index(static_cast<std::size_t>(n), nullptr);
    for (std::size_t i = 0; i < docs.size(); ++i) {
      if (shards[i].count != n)
        throw Error(fmt::format("report merge: {} is shard {}/{}, {} is of {} shards", docs[i].path, shards[i].index, shards[i].count,
                                docs.front().path, n));
      auto& slot = by_index[static_cast<std::size_t>(shards[i].index)];
      if (slot) throw Error(fmt::format("report merge: shard {}/{} given twice ({}, {})", shards[i].index, n, slot->path, docs[i].path));
      slot = &docs[i];
      for (const char* k : {"profile", "cases", "commit"})
        if (str(docs[i].json["meta"], k) != str(docs.front().json["meta"], k))
          throw Error(fmt::format("report merge: {} has {} '{}', {} has '{}'", docs[i].path, k, str(docs[i].json["meta"], k),
                                  docs.front().path, str(docs.front().json["meta"], k)));
      if (docs[i].json["meta"].value("selection", json()) != docs.front().json["meta"].value("selection", json()))
        throw Error("report merge: " + docs[i].path + " ran another --kernel/--recipe/--check selection than " + docs.front().path);
    }
    for (int i = 0; i < n; ++i)
      if (!by_index[static_cast<std::size_t>(i)]) throw Error(fmt::format("report merge: shard {}/{} is missing", i, n));
    // Each shard's results are its groups in order; the gate dealt group g to shard g % n as its
    // (g / n)-th group, so reading the shards round robin restores the unsharded order.
    std::vector<std::vector<std::vector<const json*>>> groups(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      std::string last;
      for (const auto& r : by_index[static_cast<std::size_t>(i)]->json["results"]) {
        const auto key = group_of(r);
        if (groups[static_cast<std::size_t>(i)].empty() || key != last) groups[static_cast<std::size_t>(i)].emplace_back();
        groups[static_cast<std::size_t>(i)].back().push_back(&r);
        last = key;
      }
    }
    for (std::size_t round = 0;; ++round) {
      bool any = false;
      for (int i = 0; i < n; ++i) {
        const auto& gs = groups[static_cast<std::size_t>(i)];
        if (round >= gs.size()) continue;
        any = true;
        for (const json* r : gs[round])
          if (admit(*r, by_index[static_cast<std::size_t>(i)]->path)) results.push_back(*r);
      }
      if (!any) break;
    }
  } else {
    for (const auto& d : docs)
      for (const auto& r : d.json["results"])
        if (admit(r, d.path)) results.push_back(r);
  }

  double seconds = 0;
  for (const auto& d : docs) seconds = std::max(seconds, d.json.value("seconds", 0.0));
  json meta = docs.front().json["meta"];
  meta["merged_from"] = merged_from;
  if (kind == Kind::gate) {
    if (sharded) meta["shard"] = fmt::format("0/1 (merged from {} shards)", docs.size());
    json errors = json::array();
    for (const auto& d : docs)
      for (const auto& e : d.json.value("errors", json::array()))
        if (std::find(errors.begin(), errors.end(), e) == errors.end()) errors.push_back(e);
    return gate_json(meta, results, errors, seconds);
  }
  json j;
  j["kind"] = "bench";
  j["meta"] = meta;
  j["seconds"] = seconds;
  j["results"] = results;
  return j;
}

// ---- diff ----

namespace {

struct Figure {
  std::string name;
  double measured = 0, floor = 0, bound = NAN;
  bool higher_is_better = false;
};

/// Every judged figure of a result: objects with a numeric "measured" and an "ok" verdict.
void collect_figures(const json& j, const std::string& path, std::vector<Figure>& out) {
  if (!j.is_object()) return;
  if (j.contains("measured") && j.contains("ok")) {
    Figure f;
    if (!figure_value(j["measured"], f.measured)) return;
    f.name = path;
    if (j.contains("floor")) figure_value(j["floor"], f.floor);
    if (j.contains("bound")) figure_value(j["bound"], f.bound);
    else if (j.contains("max")) figure_value(j["max"], f.bound);
    else if (j.contains("min")) figure_value(j["min"], f.bound), f.higher_is_better = true;
    out.push_back(f);
    return;
  }
  for (const auto& [k, v] : j.items()) collect_figures(v, path.empty() ? k : path + "." + k, out);
}

/// The error an accuracy figure stands for: the figure itself, or 1 - figure for similarity
/// figures (cosine) where higher is better.
double error_of(const Figure& f, double v) { return f.higher_is_better ? 1 - v : v; }

std::string short_problem(const json& r) { return str(r, "problem"); }

}  // namespace

DiffResult diff(const Doc& base, const Doc& cand, const DiffOptions& opt) {
  if (base.kind == Kind::diff || cand.kind == Kind::diff) throw Error("report diff: inputs must be gate or bench reports, not diffs");
  if (base.kind != cand.kind)
    throw Error("report diff: " + base.path + " is a " + std::string(kind_name(base.kind)) + " report, " + cand.path + " a " +
                std::string(kind_name(cand.kind)) + " report");
  if (!(opt.perf_threshold_pct >= 0) || !(opt.accuracy_threshold >= 0)) throw Error("report diff: thresholds must be >= 0");
  std::map<std::string, const json*> b, c;
  std::vector<std::string> order;
  for (const auto& r : base.json["results"]) {
    const auto k = str(r, "case");
    if (b.emplace(k, &r).second) order.push_back(k);
  }
  std::vector<std::string> only_cand;
  for (const auto& r : cand.json["results"]) {
    const auto k = apply_pairs(str(r, "case"), opt);
    if (c.emplace(k, &r).second && !b.count(k)) only_cand.push_back(k);
  }
  std::vector<std::string> only_base;
  for (const auto& k : order)
    if (!c.count(k)) only_base.push_back(k);

  json out;
  out["kind"] = "diff";
  out["of"] = kind_name(base.kind);
  out["base"] = {{"path", base.path}, {"meta", base.json["meta"]}};
  out["candidate"] = {{"path", cand.path}, {"meta", cand.json["meta"]}};
  out["thresholds"] = {{"perf_pct", opt.perf_threshold_pct}, {"accuracy", opt.accuracy_threshold}};
  json pairs = json::array();
  for (const auto& [x, y] : opt.pairs) pairs.push_back({{"base", x}, {"candidate", y}});
  out["pairs"] = pairs;
  auto& perf = out["perf"] = json::array();
  auto& acc = out["accuracy"] = json::array();
  auto& verdicts = out["verdicts"] = json::array();
  out["only_base"] = only_base;
  out["only_candidate"] = only_cand;
  int regressions = 0;
  const double pt = opt.perf_threshold_pct / 100;

  for (const auto& k : order) {
    auto it = c.find(k);
    if (it == c.end()) continue;
    const json& rb = *b[k];
    const json& rc = *it->second;
    if (base.kind == Kind::bench) {
      json row = {{"case", k}, {"type", str(rb, "type")}, {"kernel", str(rb, "kernel")}, {"recipe", str(rb, "recipe")},
                  {"scheme", str(rb, "scheme")}, {"operand", str(rb, "operand")}, {"shape", str(rb, "shape")},
                  {"problem", str(rb, "problem")}, {"base_status", str(rb, "status")}, {"cand_status", str(rc, "status")}};
      std::string flag;
      if (str(rb, "status") == "timed" && str(rc, "status") == "timed") {
        const double mb = rb["median_ms"].get<double>(), mc = rc["median_ms"].get<double>();
        const double sb = rb["spread"].get<double>(), sc = rc["spread"].get<double>();
        const double ratio = mc / mb;
        row["base_ms"] = mb;
        row["cand_ms"] = mc;
        row["ratio"] = ratio;  // time ratio: > 1 is slower
        row["base_spread"] = sb;
        row["cand_spread"] = sc;
        const char* rate = str(rb, "type") == "quantizer" ? "gbs" : "tflops";
        if (rb.contains(rate) && rc.contains(rate)) {
          row["rate"] = rate;
          row["base_rate"] = rb[rate];
          row["cand_rate"] = rc[rate];
        }
        // Noise: a change inside the two runs' combined relative spread is not a change.
        const double noise = sb + sc;
        if (ratio - 1 > pt && ratio - 1 > noise) flag = "regression";
        else if (1 - ratio > pt && 1 - ratio > noise) flag = "improvement";
        else if (std::abs(ratio - 1) > pt) flag = "noise";
      } else if (str(rb, "status") == "timed") {
        flag = "regression";  // the candidate stopped running it
        row["reason"] = str(rc, "reason");
      } else if (str(rc, "status") == "timed") {
        flag = "improvement";
      }
      row["flag"] = flag;
      regressions += flag == "regression";
      perf.push_back(row);
      continue;
    }
    // Gate: verdicts, then every judged figure.
    const auto vb = parse_verdict(str(rb, "verdict")), vc = parse_verdict(str(rc, "verdict"));
    if (vb != vc) {
      std::string flag = verdict_ok(vb) && !verdict_ok(vc) ? "regression"
                         : !verdict_ok(vb) && verdict_ok(vc) ? "improvement"
                         : vb == Verdict::passed && vc == Verdict::unsupported ? "regression"  // lost support
                                                                             : "changed";
      regressions += flag == "regression";
      verdicts.push_back({{"case", k}, {"kernel", str(rb, "kernel")}, {"recipe", str(rb, "recipe")}, {"check", str(rb, "check")},
                          {"base", str(rb, "verdict")}, {"candidate", str(rc, "verdict")}, {"flag", flag},
                          {"reason", str(rc, "reason")}});
    }
    std::vector<Figure> fb, fc;
    collect_figures(rb.value("figures", json::object()), "", fb);
    collect_figures(rc.value("figures", json::object()), "", fc);
    for (const auto& f : fb) {
      auto m = std::find_if(fc.begin(), fc.end(), [&](const Figure& x) { return x.name == f.name; });
      if (m == fc.end()) continue;
      const double eb = error_of(f, f.measured), ec = error_of(f, m->measured);
      const double ratio = eb > 0 ? ec / eb : ec > 0 ? INFINITY : 1.0;
      const double noise = std::max(f.floor, m->floor);
      std::string flag;
      // An error figure that grew by more than the threshold and by more than what reordering
      // alone moves (the floor) is a regression, even inside the bound.
      if (std::isnan(ec) && !std::isnan(eb)) flag = "regression";
      else if (ratio > 1 + opt.accuracy_threshold && ec - eb > noise) flag = "regression";
      else if (ratio < 1 / (1 + opt.accuracy_threshold) && eb - ec > noise) flag = "improvement";
      regressions += flag == "regression";
      acc.push_back({{"case", k}, {"kernel", str(rb, "kernel")}, {"recipe", str(rb, "recipe")}, {"problem", short_problem(rb)},
                     {"dist", str(rb, "dist")}, {"seed", rb.value("seed", 0)}, {"check", str(rb, "check")}, {"figure", f.name},
                     {"base", json_number(f.measured)}, {"candidate", json_number(m->measured)}, {"ratio", json_number(ratio)},
                     {"floor", json_number(noise)}, {"bound", json_number(m->bound)}, {"flag", flag}});
    }
  }
  out["regressions"] = regressions;
  out["exit_code"] = regressions ? 1 : 0;
  DiffResult res;
  res.regressions = regressions;
  res.json = out;
  Doc d;
  d.kind = Kind::diff;
  d.json = out;
  res.markdown = markdown(d);
  return res;
}

// ---- Markdown ----

namespace {

std::string diff_markdown(const json& j) {
  const bool bench = str(j, "of") == "bench";
  const int reg = j.value("regressions", 0);
  auto meta = [&](const char* side, const char* k) { return str(j[side]["meta"], k); };
  std::string s = fmt::format("## attest report diff ({}): {}\n\n", str(j, "of"),
                              reg ? fmt::format("REGRESSED ({} regression{})", reg, reg == 1 ? "" : "s") : "no regression");
  s += fmt::format("- base: `{}` (suite `{}`, {})\n- candidate: `{}` (suite `{}`, {})\n", str(j["base"], "path"),
                   meta("base", "commit"), meta("base", "device"), str(j["candidate"], "path"), meta("candidate", "commit"),
                   meta("candidate", "device"));
  s += fmt::format("- thresholds: performance {}% beyond the runs' combined spread; accuracy figure +{:.0f}% beyond the floor\n",
                   j["thresholds"].value("perf_pct", 0.0), 100 * j["thresholds"].value("accuracy", 0.0));
  for (const auto& p : j.value("pairs", json::array()))
    s += fmt::format("- kernel `{}` (candidate) joined as `{}` (base)\n", str(p, "candidate"), str(p, "base"));
  s += "\n";
  if (bench) {
    auto flag_cell = [](const json& r) { return str(r, "flag") == "regression" ? Cell::strong("REGRESSION") : Cell(str(r, "flag")); };
    Table perf({{"kernel"}, {"recipe"}, {"shape"}, {"base ms", Align::right}, {"candidate ms", Align::right}, {"ratio", Align::right},
                {"base TFLOP/s", Align::right}, {"candidate TFLOP/s", Align::right}, {"spread b / c", Align::right}, {"flag"}});
    Table quant({{"operand"}, {"scheme"}, {"problem"}, {"base ms", Align::right}, {"candidate ms", Align::right}, {"ratio", Align::right},
                 {"base GB/s", Align::right}, {"candidate GB/s", Align::right}, {"flag"}});
    for (const auto& r : j["perf"]) {
      const bool both = r.contains("ratio");
      std::vector<Cell> times = {both ? g(r["base_ms"].get<double>()) : str(r, "base_status"),
                                 both ? g(r["cand_ms"].get<double>()) : str(r, "cand_status"),
                                 both ? ratio_str(r["ratio"].get<double>()) : "—",
                                 r.contains("base_rate") ? g(r["base_rate"].get<double>()) : "—",
                                 r.contains("cand_rate") ? g(r["cand_rate"].get<double>()) : "—"};
      if (str(r, "type") == "attention") {
        std::vector<Cell> row = {Cell::code(str(r, "kernel")), Cell::code(str(r, "recipe")), str(r, "shape")};
        row.insert(row.end(), times.begin(), times.end());
        row.push_back(both ? fmt::format("{:.1f}% / {:.1f}%", 100 * r["base_spread"].get<double>(), 100 * r["cand_spread"].get<double>()) : "—");
        row.push_back(flag_cell(r));
        perf.add(std::move(row));
      } else if (str(r, "type") == "quantizer") {
        std::vector<Cell> row = {str(r, "operand"), Cell::code(str(r, "scheme")), Cell::code(str(r, "problem"))};
        row.insert(row.end(), times.begin(), times.end());
        row.push_back(flag_cell(r));
        quant.add(std::move(row));
      }
    }
    if (!perf.empty()) s += "### Performance per case (time ratio candidate / base: > 1 is slower)\n\n" + perf.markdown() + "\n";
    if (!quant.empty()) s += "### Quantizers\n\n" + quant.markdown() + "\n";
  } else {
    if (!j["verdicts"].empty()) {
      // One line per kernel x recipe x check x change; every case is in the JSON.
      struct Change {
        std::size_t n = 0;
        std::string flag, reason;
      };
      std::map<std::tuple<std::string, std::string, std::string, std::string>, Change> changes;
      std::vector<std::tuple<std::string, std::string, std::string, std::string>> keys;
      for (const auto& r : j["verdicts"]) {
        auto key = std::make_tuple(str(r, "kernel"), str(r, "recipe"), str(r, "check"), str(r, "base") + " → " + str(r, "candidate"));
        auto [it, fresh] = changes.emplace(key, Change{0, str(r, "flag"), str(r, "reason")});
        if (fresh) keys.push_back(key);
        ++it->second.n;
      }
      Table t({{"kernel"}, {"recipe"}, {"check"}, {"base → candidate"}, {"cases", Align::right}, {"flag"}, {"first candidate reason"}});
      for (const auto& key : keys) {
        const Change& c = changes[key];
        std::string reason = c.reason;
        if (reason.size() > 110) reason = reason.substr(0, 107) + "...";
        for (char& ch : reason)
          if (ch == '|') ch = '/';
        t.add({Cell::code(std::get<0>(key)), Cell::code(std::get<1>(key)), std::get<2>(key), std::get<3>(key), std::to_string(c.n),
               c.flag == "regression" ? Cell::strong("REGRESSION") : Cell(c.flag), reason});
      }
      s += "### Verdict changes\n\n" + t.markdown() + "\n";
    }
    // Per check figure: one line per kernel x recipe x check x figure, summarising its cases by
    // the worst ratio (and the base / candidate values of that case).
    struct Agg {
      std::size_t n = 0, reg = 0, imp = 0;
      double worst = -1, base = 0, cand = 0, floor = 0;
      bool first = true;
    };
    std::map<std::tuple<std::string, std::string, std::string, std::string>, Agg> agg;
    std::vector<std::tuple<std::string, std::string, std::string, std::string>> keys;
    for (const auto& r : j["accuracy"]) {
      auto key = std::make_tuple(str(r, "kernel"), str(r, "recipe"), str(r, "check"), str(r, "figure"));
      auto [it, fresh] = agg.emplace(key, Agg{});
      if (fresh) keys.push_back(key);
      Agg& a = it->second;
      ++a.n;
      a.reg += str(r, "flag") == "regression";
      a.imp += str(r, "flag") == "improvement";
      double ratio = 0, vb = 0, vc = 0, fl = 0;
      figure_value(r["ratio"], ratio);
      figure_value(r["base"], vb);
      figure_value(r["candidate"], vc);
      figure_value(r["floor"], fl);
      if (a.first || ratio > a.worst || std::isnan(ratio)) a.worst = ratio, a.base = vb, a.cand = vc, a.floor = fl, a.first = false;
    }
    if (!keys.empty()) {
      Table t({{"kernel"}, {"recipe"}, {"check"}, {"figure"}, {"cases", Align::right}, {"base", Align::right}, {"candidate", Align::right},
               {"ratio", Align::right}, {"floor", Align::right}, {"flag"}});
      for (const auto& key : keys) {
        const Agg& a = agg[key];
        std::string flag = a.reg ? fmt::format("**REGRESSION** ({} case{})", a.reg, a.reg == 1 ? "" : "s")
                           : a.imp ? fmt::format("improvement ({})", a.imp) : "";
        std::string fig = std::get<3>(key);
        if (fig.rfind("judgement.metrics.", 0) == 0) fig = fig.substr(18);
        t.add({Cell::code(std::get<0>(key)), Cell::code(std::get<1>(key)), std::get<2>(key), fig, std::to_string(a.n), g(a.base), g(a.cand),
               ratio_str(a.worst), g(a.floor), flag});
      }
      s += "### Accuracy per check figure (worst case by ratio candidate / base; cosine as 1 - cosine)\n\n" + t.markdown() + "\n";
    }
    std::string regs;
    std::size_t n = 0, total = 0;
    for (const auto& r : j["accuracy"])
      if (str(r, "flag") == "regression") {
        ++total;
        if (n++ < 30) {
          double vb = 0, vc = 0, ratio = 0;
          figure_value(r["base"], vb), figure_value(r["candidate"], vc), figure_value(r["ratio"], ratio);
          regs += fmt::format("- `{}` {}: {} → {} (x{})\n  ```\n  attest run '{}'\n  ```\n", str(r, "figure"), str(r, "check"), g(vb), g(vc),
                              ratio_str(ratio), str(r, "case"));
        }
      }
    if (total) {
      s += fmt::format("### Accuracy regressions ({})\n\n", total) + regs;
      if (total > 30) s += fmt::format("\n… and {} more in the JSON.\n", total - 30);
      s += "\n";
    }
  }
  auto one_sided = [&](const char* key, const char* title) {
    const auto& v = j[key];
    if (v.empty()) return;
    s += fmt::format("### {} ({})\n\n", title, v.size());
    std::size_t n = 0;
    for (const auto& c : v) {
      if (n++ == 30) {
        s += fmt::format("- … {} more in the JSON\n", v.size() - 30);
        break;
      }
      s += "- `" + c.get<std::string>() + "`\n";
    }
    s += "\n";
  };
  one_sided("only_base", "Only in base");
  one_sided("only_candidate", "Only in candidate");
  return s;
}

}  // namespace

std::string markdown(const Doc& doc) {
  if (doc.kind == Kind::bench) return bench_markdown(doc.json);
  if (doc.kind == Kind::diff) return diff_markdown(doc.json);
  GateReport rep;
  rep.meta = doc.json["meta"];
  for (const auto& e : doc.json.value("errors", json::array())) rep.errors.push_back(e.get<std::string>());
  for (const auto& r : doc.json["results"]) rep.results.push_back(result_from_json(r));
  return markdown_report(rep);
}

}  // namespace attest::conformance::report

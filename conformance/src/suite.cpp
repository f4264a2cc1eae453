#include "attest/conformance/suite.hpp"

#include <fnmatch.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "attest/conformance/check.hpp"
#include "attest/core/status.hpp"
#include "attest/kernels/kernel.hpp"
#include "embedded.hpp"

namespace attest::conformance {
namespace {

bool glob(const std::string& pattern, const std::string& s) { return ::fnmatch(pattern.c_str(), s.c_str(), 0) == 0; }
bool any_glob(const std::vector<std::string>& patterns, const std::string& s) {
  for (const auto& p : patterns)
    if (glob(p, s)) return true;
  return false;
}
bool has_glob_char(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::string read_file(const std::string& path, std::string_view what) {
  std::ifstream in(path);
  if (!in) throw Error(std::string(what) + " '" + path + "': cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> builtin(std::string_view prefix, std::string_view suffix) {
  std::vector<std::string> out;
  for (const auto& [name, text] : embedded::files())
    if (name.starts_with(prefix) && name.ends_with(suffix))
      out.emplace_back(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()));
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += (s.empty() ? "" : ", ") + e;
  return s;
}

std::vector<std::string> split_commas(std::string_view s) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    const auto c = s.find(',', pos);
    out.emplace_back(s.substr(pos, c == std::string_view::npos ? std::string_view::npos : c - pos));
    if (c == std::string_view::npos) break;
    pos = c + 1;
  }
  return out;
}

}  // namespace

std::vector<std::uint64_t> parse_seed_list(std::string_view s) {
  std::vector<std::uint64_t> out;
  auto num = [&](std::string_view t) {
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || p != t.data() + t.size())
      throw Error("seed list '" + std::string(s) + "': '" + std::string(t) + "' is not a non-negative integer");
    return v;
  };
  for (const auto& item : split_commas(s)) {
    const auto dash = item.find('-');
    if (dash == std::string::npos) {
      out.push_back(num(item));
      continue;
    }
    const auto lo = num(std::string_view(item).substr(0, dash)), hi = num(std::string_view(item).substr(dash + 1));
    if (hi < lo || hi - lo > 100000) throw Error("seed list '" + std::string(s) + "': bad range '" + item + "'");
    for (auto v = lo; v <= hi; ++v) out.push_back(v);
  }
  return out;
}

std::vector<std::string> CaseFile::builtin_names() { return builtin("cases/", ".cases"); }

CaseFile CaseFile::load(std::string_view set_or_path) {
  const std::string key = "cases/" + std::string(set_or_path) + ".cases";
  if (auto text = embedded::find(key); !text.empty()) return parse(text, set_or_path);
  const std::string path(set_or_path);
  if (path.find('/') == std::string::npos && path.find('.') == std::string::npos)
    throw Error("case set '" + path + "' unknown (built-in: " + join(builtin_names()) + "; or give a file path)");
  return parse(read_file(path, "case file"), path);
}

CaseFile CaseFile::parse(std::string_view text, std::string_view source) {
  CaseFile f;
  f.name = std::string(source);
  std::istringstream in{std::string(text)};
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (auto h = line.find('#'); h != std::string::npos) line.erase(h);
    std::istringstream ls(line);
    std::string tok;
    CaseTemplate t;
    t.line = n;
    bool any = false;
    const std::string where = "case file '" + f.name + "' line " + std::to_string(n);
    while (ls >> tok) {
      any = true;
      const auto eq = tok.find('=');
      if (eq == std::string::npos || eq + 1 == tok.size())
        throw Error(where + ": field '" + tok + "' needs key=value (keys: kernel recipe problem dist seed check)");
      const std::string key = tok.substr(0, eq), value = tok.substr(eq + 1);
      if (key == "kernel") t.kernel = value;
      else if (key == "recipe") t.recipe = value;
      else if (key == "problem") t.problem = value;
      else if (key == "check") t.check = value;
      else if (key == "dist") t.dists = split_commas(value);
      else if (key == "seed") {
        try {
          t.seeds = parse_seed_list(value);
        } catch (const Error& e) {
          throw Error(where + ": " + e.what());
        }
      } else throw Error(where + ": unknown field '" + key + "' (valid: kernel recipe problem dist seed check)");
    }
    if (!any) continue;
    if (t.problem.empty()) throw Error(where + ": field 'problem' is missing");
    try {
      (void)parse_problem(t.problem);
      for (const auto& d : t.dists)
        if (d != "*") (void)datasets::parse_distribution(d);
      (void)match_checks(t.check);
      if (!has_glob_char(t.recipe)) (void)parse_recipe(t.recipe);
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
    f.templates.push_back(std::move(t));
  }
  if (f.templates.empty()) throw Error("case file '" + f.name + "': no case templates");
  return f;
}

std::vector<std::string> Profile::builtin_names() { return builtin("profiles/", ".json"); }

Profile Profile::load(std::string_view name_or_path) {
  if (auto text = embedded::find("profiles/" + std::string(name_or_path) + ".json"); !text.empty())
    return parse(text, name_or_path);
  const std::string path(name_or_path);
  if (path.find('/') == std::string::npos && path.find('.') == std::string::npos)
    throw Error("profile '" + path + "' unknown (built-in: " + join(builtin_names()) + "; or give a JSON file path)");
  return parse(read_file(path, "profile"), path);
}

Profile Profile::parse(std::string_view text, std::string_view source) {
  const std::string where = "profile '" + std::string(source) + "'";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": " + e.what());
  }
  if (!j.is_object()) throw Error(where + ": not a JSON object");
  Profile p;
  static const std::vector<std::string> keys{"name", "description", "fp8", "mx", "kernels", "required", "recipes",
                                             "exclude_recipes", "cases", "qualify_cases", "notes"};
  for (const auto& [k, v] : j.items())
    if (std::find(keys.begin(), keys.end(), k) == keys.end())
      throw Error(where + ": unknown key '" + k + "' (valid: " + join(keys) + ")");
  try {
    p.name = j.at("name").get<std::string>();
    p.description = j.value("description", "");
    p.fp8 = j.value("fp8", "ocp");
    p.mx = j.value("mx", "emulated");
    p.kernels = j.value("kernels", std::vector<std::string>{"*"});
    p.required = j.value("required", std::vector<std::string>{});
    p.recipes = j.value("recipes", std::vector<std::string>{"*"});
    p.exclude_recipes = j.value("exclude_recipes", std::vector<std::string>{});
    p.cases = j.value("cases", "smoke");
    p.qualify_cases = j.value("qualify_cases", "qualify");
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": " + e.what());
  }
  if (p.fp8 != "ocp" && p.fp8 != "fnuz") throw Error(where + ": fp8 '" + p.fp8 + "' unknown (valid: ocp, fnuz)");
  if (p.mx != "native" && p.mx != "emulated") throw Error(where + ": mx '" + p.mx + "' unknown (valid: native, emulated)");
  return p;
}

Expansion expand(const CaseFile& file, const Profile& profile, const Selection& sel) {
  Expansion ex;
  auto& reg = kernels::Registry::instance();
  for (const auto& g : profile.required)
    if (reg.match(g).empty())
      ex.errors.push_back("profile " + profile.name + " requires kernel '" + g + "' which this build does not register");
  const auto sel_checks = sel.check.empty() ? std::vector<const Check*>(all_checks().begin(), all_checks().end())
                                            : match_checks(sel.check);
  const bool want_mutants = reg.selects_planted_bugs(sel.kernel);
  std::unordered_set<std::string> seen;
  for (const auto& t : file.templates) {
    const std::string where = "case file '" + file.name + "' line " + std::to_string(t.line);
    const Problem problem = parse_problem(t.problem);
    std::vector<datasets::Distribution> dists;
    for (const auto& d : t.dists) {
      if (d == "*") {
        for (auto x : datasets::all_distributions()) dists.push_back(x);
      } else {
        dists.push_back(datasets::parse_distribution(d));
      }
    }
    // The refusal check joins every template whose check list omits it (when the selection
    // admits it): a call-time refusal (kernels::KernelRefused) in any check of a case is judged
    // by that case's one refusal row, which must therefore exist.
    const auto listed = match_checks(t.check);
    std::vector<const Check*> checks;
    for (const Check* c : all_checks())
      if ((std::find(listed.begin(), listed.end(), c) != listed.end() || c->name() == "refusal") &&
          std::find(sel_checks.begin(), sel_checks.end(), c) != sel_checks.end())
        checks.push_back(c);
    for (const auto& kp : reg.all()) {
      const std::string name = kp->name();
      if (!glob(t.kernel, name)) continue;
      // Outside the selection before capabilities() is asked: a GPU kernel's capabilities query
      // the device, and a process that initialised the CUDA driver cannot fork a worker that uses
      // CUDA (the Python gate on py.* forks its workers, python/attest/_worker.py).
      if (!sel.kernel.empty() && !glob(sel.kernel, name)) continue;
      if (kp->capabilities().planted_bug) {
        if (!want_mutants || !glob(sel.kernel, name)) continue;
      } else {
        if (!any_glob(profile.kernels, name)) continue;
      }
      std::vector<std::string> labels;
      const auto implemented = kp->recipes();
      for (const auto& r : implemented)
        if (glob(t.recipe, r)) labels.push_back(r);
      if (!has_glob_char(t.recipe) && !has_glob_char(t.kernel) && labels.empty()) labels.push_back(t.recipe);
      for (const auto& label : labels) {
        if (!any_glob(profile.recipes, label) || any_glob(profile.exclude_recipes, label)) continue;
        if (!sel.recipe.empty() && !glob(sel.recipe, label)) continue;
        Recipe recipe;
        try {
          recipe = parse_recipe(label);
        } catch (const Error& e) {
          throw Error(where + ": kernel " + name + " lists recipe '" + label + "': " + e.what());
        }
        for (const auto d : dists)
          for (const auto seed : t.seeds)
            for (const Check* c : checks) {
              Case cs{name, recipe, problem, d, seed, std::string(c->name())};
              if (seen.insert(to_string(cs)).second) ex.cases.push_back(std::move(cs));
            }
      }
    }
  }
  return ex;
}

}  // namespace attest::conformance

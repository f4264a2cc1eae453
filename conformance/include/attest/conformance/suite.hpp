#pragma once
/// Case files and profiles, and their expansion into concrete cases.
///
/// Case file (datasets/cases/<set>.cases): one descriptor template per line, '#' starts a
/// comment. Fields as in a case descriptor, but
///   kernel=GLOB   (default *)   expanded against the registry, the profile and --kernel
///   recipe=GLOB   (default *)   expanded against each kernel's recipes(); a literal recipe
///                               (no glob character) on a literal kernel is kept even when the
///                               kernel does not implement it (a refusal case)
///   problem=P                   required, one problem string
///   dist=A,B|*    (default normal)
///   seed=1,4-9    (default 1)   lists and inclusive ranges
///   check=G,H     (default *)   globs over check names
/// e.g. `kernel=cpu.* recipe=* problem=b1h2s128d64:mask=causal_tl dist=normal,sink seed=1-2`.
///
/// Profile (conformance/profiles/<name>.json): which kernels and recipes a device must pass.
///   {"name": "gfx942", "description": "...", "fp8": "fnuz", "mx": "emulated",
///    "kernels": ["gpu.*"], "required": ["gpu.fwd.*"], "recipes": ["*"],
///    "exclude_recipes": ["*ocp*"], "cases": "ci", "qualify_cases": "qualify"}
/// Every `required` glob must match a registered kernel (else a setup error fails the gate).
/// Mutant kernels (Capabilities::planted_bug, named "mutant.*") are selected only by an explicit
/// --kernel glob that matches mutants alone ("mutant*", Registry::selects_planted_bugs), and then
/// regardless of the profile's kernel list.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "attest/conformance/case.hpp"

namespace attest::conformance {

struct CaseTemplate {
  std::string kernel = "*", recipe = "*", problem, check = "*";
  std::vector<std::string> dists{"normal"};
  std::vector<std::uint64_t> seeds{1};
  int line = 0;
};

struct CaseFile {
  std::string name;  ///< set name or file path
  std::vector<CaseTemplate> templates;

  /// A built-in set (smoke, ci, nightly, qualify, seeds: datasets/cases/*.cases compiled in)
  /// or a file path; throws attest::Error listing the built-in names.
  static CaseFile load(std::string_view set_or_path);
  static CaseFile parse(std::string_view text, std::string_view source);
  static std::vector<std::string> builtin_names();
};

struct Profile {
  std::string name, description;
  std::string fp8 = "ocp";      ///< e4m3 flavour of the device: "ocp" or "fnuz"
  std::string mx = "emulated";  ///< "native" or "emulated"
  std::vector<std::string> kernels{"*"}, required, recipes{"*"}, exclude_recipes;
  std::string cases = "smoke";            ///< default case set of `attest gate`
  std::string qualify_cases = "qualify";  ///< case set of `attest qualify`

  /// A built-in profile (cpu, sm90, gfx942, gfx950, gfx1201) or a JSON file path.
  static Profile load(std::string_view name_or_path);
  static Profile parse(std::string_view json_text, std::string_view source);
  static std::vector<std::string> builtin_names();
};

/// User narrowing on top of a profile (empty = no narrowing).
struct Selection {
  std::string kernel;  ///< glob; a glob matching mutants alone ("mutant*") also selects mutants
  std::string recipe;  ///< glob over recipe labels
  std::string check;   ///< globs over check names
};

struct Expansion {
  std::vector<Case> cases;          ///< in file order; checks innermost
  std::vector<std::string> errors;  ///< setup errors (a required kernel is not registered)
};

/// Expands a case file for a profile and a selection against the kernel registry. Cases whose
/// descriptor repeats are kept once. Throws attest::Error on a malformed template.
Expansion expand(const CaseFile& file, const Profile& profile, const Selection& sel);

/// Parses "1,4-9" into {1,4,5,...,9}; throws attest::Error.
std::vector<std::uint64_t> parse_seed_list(std::string_view s);

}  // namespace attest::conformance

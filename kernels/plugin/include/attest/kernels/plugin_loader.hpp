#pragma once
/// Loads kernel plugins (shared libraries speaking the C ABI of attest/plugin.h) and adapts
/// their kernels into the one registry as `plugin.<plugin>.<kernel>`, so every gate check runs
/// on them. Errors are one line (attest::Error) naming the file and the defect; a plugin that is
/// refused registers nothing.
#include <filesystem>
#include <string>
#include <vector>

namespace attest::kernels {

struct LoadedPlugin {
  std::filesystem::path path;        ///< as given
  std::string name, version;         ///< from attest_plugin_info
  std::vector<std::string> kernels;  ///< registry names, in the plugin's order
};

/// dlopen()s `path`, queries it and registers its kernels. Loading the same file again (same
/// canonical path) returns the first load's result. Throws attest::Error on a missing or
/// unloadable file, a missing attest_plugin_query symbol, an ABI version or struct size
/// mismatch, an invalid kernel description (name, recipe, capability bits) or a kernel name the
/// registry already holds. The library stays loaded for the life of the process.
LoadedPlugin load_plugin(const std::filesystem::path& path);

}  // namespace attest::kernels

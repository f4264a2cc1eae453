#pragma once
/// Test support: run the `attest` CLI as a user would and keep what it printed. ATTEST_CLI (the
/// binary's path) is a compile definition of the test targets that use it.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace attest::testing {

struct CliRun {
  int code = -1;    ///< exit status; -1 when the command could not run or was killed
  std::string out;  ///< stdout and stderr together
};

/// Runs a shell command with stderr folded into stdout.
inline CliRun run_command(const std::string& command) {
  CliRun r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p) != nullptr) r.out += buf.data();
  const int st = ::pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

#ifdef ATTEST_CLI
/// `attest ARGS`.
inline CliRun run_cli(const std::string& args) { return run_command(std::string(ATTEST_CLI) + " " + args); }
#endif

}  // namespace attest::testing

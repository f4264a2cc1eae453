// The `attest` command line: one program, subcommands in cmd_*.cpp (see commands.hpp).
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "attest/core/status.hpp"
#include "commands.hpp"

namespace attest::cli {
namespace {
int g_exit = 0;
}
void set_exit(int code) { g_exit = code; }
}  // namespace attest::cli

int main(int argc, char** argv) {
  CLI::App app{"attest: numerical validation and conformance of low-precision attention kernels.\n"
               "Exit codes: 0 pass, 1 a check failed, 2 usage or input error."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "attest 0.1.0");
  attest::cli::add_reference_command(app);
  attest::cli::add_generate_command(app);
  attest::cli::add_codec_command(app);
  attest::cli::add_gate_command(app);
  attest::cli::add_run_command(app);
  attest::cli::add_list_command(app);
  attest::cli::add_check_command(app);
  attest::cli::add_quantize_commands(app);
  attest::cli::add_bench_command(app);
  attest::cli::add_report_command(app);
#if ATTEST_MEDIA
  attest::cli::add_e2e_synth_commands(app);
  attest::cli::add_e2e_compare_command(app);
  attest::cli::add_metrics_commands(app);
#else
  // A build without OpenCV/libsndfile (the GPU machine's bundle) names why, not "unknown command".
  for (const char* name : {"e2e", "metrics"}) {
    auto* c = app.add_subcommand(name, "(not in this build: ATTEST_MEDIA=OFF)");
    c->allow_extras();
    c->callback([name] {
      throw attest::Error(std::string("attest ") + name +
                          ": not in this build (configured with ATTEST_MEDIA=OFF: no OpenCV/libsndfile); "
                          "use a CPU build of attest");
    });
  }
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "attest: error: %s\n", e.what());
    return 2;
  } catch (const attest::Error& e) {
    std::fprintf(stderr, "attest: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attest: internal error: %s\n", e.what());
    return 3;
  }
  return attest::cli::g_exit;
}

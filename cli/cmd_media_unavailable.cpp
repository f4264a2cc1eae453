// A build without OpenCV/libsndfile (ATTEST_MEDIA=OFF: the GPU machine's bundle) still knows the
// `e2e` and `metrics` commands and names why they cannot run, instead of "unknown command".
#include <string>

#include "attest/core/status.hpp"
#include "commands.hpp"

namespace attest::cli {
namespace {

void add_media_unavailable(CLI::App& app) {
  for (const char* name : {"e2e", "metrics"}) {
    auto* c = app.add_subcommand(name, "(not in this build: ATTEST_MEDIA=OFF)");
    c->allow_extras();
    c->callback([name] {
      throw Error(std::string("attest ") + name +
                  ": not in this build (configured with ATTEST_MEDIA=OFF: no OpenCV/libsndfile); use a CPU build of attest");
    });
  }
}

}  // namespace
ATTEST_REGISTER_COMMAND(110, add_media_unavailable);
}  // namespace attest::cli

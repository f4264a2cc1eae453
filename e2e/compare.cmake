# issue 6: attest_e2e_compare (e2e/compare): decode runs, media metrics against the reference,
# floor verdicts, Markdown/JSON/strip/HTML; `attest e2e compare`, `attest metrics image|audio`.
find_package(ZLIB REQUIRED)  # matroska_crcs_valid checks CRCs with zlib, independent of the writer's
attest_library(attest_e2e_compare
  SOURCES compare/video_io.cpp compare/matroska.cpp compare/compare.cpp compare/report.cpp
  DEPS attest_core attest_report attest_media attest_opencv nlohmann_json::nlohmann_json fmt::fmt OpenMP::OpenMP_CXX ZLIB::ZLIB)

attest_test(e2e_compare_tests
  SOURCES compare/tests/test_compare.cpp
  DEPS attest_e2e_compare
  DEFINES ATTEST_MEDIA_TEST_DATA="${PROJECT_SOURCE_DIR}/metrics/tests/data"
  LABELS unit
  RUNS_CLI)

# scripts/bench-media's measuring program (not a test).
if(ATTEST_BUILD_BENCHMARKS)
  add_executable(attest_media_bench compare/bench_media.cpp)
  target_link_libraries(attest_media_bench PRIVATE attest_e2e_compare OpenMP::OpenMP_CXX)
  attest_target_defaults(attest_media_bench)
endif()

# The registry's "one file" proof (issue 18): a metric registered only in this binary.
attest_test(e2e_metric_registry_tests
  SOURCES compare/tests/test_metric_registry.cpp
  DEPS attest_e2e_compare
  LABELS unit)

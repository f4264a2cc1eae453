# Capture I/O (issue 7): safetensors next to .npy in attest_datasets, and tests that replay the
# committed fuzz corpora (fuzz/corpus/<parser>/) through both parsers. The libFuzzer targets
# themselves (fuzz/*.cpp) are built by scripts/fuzz with clang, not by this build.
target_sources(attest_datasets PRIVATE src/safetensors.cpp)
target_link_libraries(attest_datasets PUBLIC nlohmann_json::nlohmann_json)

attest_test(capture_io_tests
  SOURCES tests/test_safetensors.cpp tests/test_fuzz_corpora.cpp
  DEPS attest_datasets
  LABELS unit)
if(TARGET capture_io_tests)
  target_compile_definitions(capture_io_tests PRIVATE
    ATTEST_FUZZ_CORPORA="${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus")
endif()

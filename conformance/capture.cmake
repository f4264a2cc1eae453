# `attest check --capture` (issue 7): captured attention calls judged by the gate's accuracy rule.
# Included from conformance/CMakeLists.txt after gate.cmake (attest_conformance exists).
target_sources(attest_conformance PRIVATE src/capture.cpp)
target_link_libraries(attest_conformance PUBLIC attest_ref_quantize attest_ref_formats)

if(ATTEST_BUILD_TESTS)
  attest_test(capture_tests
    SOURCES tests/test_capture.cpp
    DEPS attest_conformance attest_kernels
    DEFINES ATTEST_PY_CAPTURE="${PROJECT_SOURCE_DIR}/scripts/python/attest_capture.py"
    LABELS unit
    RUNS_CLI)
endif()

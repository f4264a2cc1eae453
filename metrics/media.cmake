# attest_media: PSNR/SSIM/statistics on images and frames, audio metrics. Included from
# metrics/CMakeLists.txt.

# OpenCV: Debian's narrow -dev packages (libopencv-{core,imgproc,imgcodecs,videoio}-dev) ship the
# headers and libraries but not OpenCVConfig.cmake (that comes with libopencv-dev and ~85 more
# packages), so fall back to locating the four modules directly.
find_package(OpenCV QUIET COMPONENTS core imgproc imgcodecs videoio)
if(OpenCV_FOUND)
  add_library(attest_opencv INTERFACE)
  target_include_directories(attest_opencv SYSTEM INTERFACE ${OpenCV_INCLUDE_DIRS})
  target_link_libraries(attest_opencv INTERFACE ${OpenCV_LIBS})
else()
  find_path(ATTEST_OPENCV_INCLUDE_DIR opencv2/core.hpp PATH_SUFFIXES opencv4 REQUIRED)
  add_library(attest_opencv INTERFACE)
  target_include_directories(attest_opencv SYSTEM INTERFACE ${ATTEST_OPENCV_INCLUDE_DIR})
  foreach(m videoio imgcodecs imgproc core)
    find_library(ATTEST_OPENCV_${m} opencv_${m} REQUIRED)
    target_link_libraries(attest_opencv INTERFACE ${ATTEST_OPENCV_${m}})
  endforeach()
endif()
find_package(PkgConfig REQUIRED)
# GLOBAL: attest_media links it publicly and is used from other folders (e2e).
pkg_check_modules(SNDFILE REQUIRED IMPORTED_TARGET GLOBAL sndfile)

# The margin table (media_margins.json) is compiled in, so a copied binary needs nothing beside it;
# editing it reconfigures.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/media_margins.json)
file(READ ${CMAKE_CURRENT_SOURCE_DIR}/media_margins.json ATTEST_MEDIA_MARGINS_JSON)
file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/media_margins_embed.cpp @ONLY CONTENT
"// Generated from metrics/media_margins.json by metrics/media.cmake; do not edit.
#include <string_view>
namespace attest::metrics::embedded {
std::string_view media_margins_json() { return R\"attest_json(@ATTEST_MEDIA_MARGINS_JSON@)attest_json\"; }
}  // namespace attest::metrics::embedded
")

attest_library(attest_media_core
  SOURCES src/media.cpp src/media_audio.cpp src/media_registry.cpp ${CMAKE_CURRENT_BINARY_DIR}/media_margins_embed.cpp
  DEPS attest_core attest_opencv PkgConfig::SNDFILE OpenMP::OpenMP_CXX fmt::fmt nlohmann_json::nlohmann_json)

# The registered metrics (media_registry.hpp): one file each under src/media_metrics/, found by the
# glob (adding a metric is adding its file). Linked whole (WHOLE_ARCHIVE), so that their static
# registrars are kept although nothing references them by name.
file(GLOB ATTEST_MEDIA_METRIC_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/media_metrics/*.cpp)
attest_library(attest_media_metrics
  SOURCES ${ATTEST_MEDIA_METRIC_SOURCES}
  DEPS attest_media_core fmt::fmt)

# attest_media: the metrics, the registry and every registered metric.
add_library(attest_media INTERFACE)
target_link_libraries(attest_media INTERFACE attest_media_core "$<LINK_LIBRARY:WHOLE_ARCHIVE,attest_media_metrics>")

attest_test(metrics_media_tests
  SOURCES tests/test_media.cpp tests/test_media_audio.cpp
  DEPS attest_media nlohmann_json::nlohmann_json
  LABELS unit)
if(TARGET metrics_media_tests)
  target_compile_definitions(metrics_media_tests PRIVATE
    ATTEST_MEDIA_TEST_DATA="${CMAKE_CURRENT_SOURCE_DIR}/tests/data")
endif()

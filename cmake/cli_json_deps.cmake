# CLI11 (command lines of dash-bench and dash-model) and nlohmann-json (their
# JSON files), both header-only. Debian packages libcli11-dev and
# nlohmann-json3-dev; scripts/install_deps.sh installs them. Only the apps and
# the tests need them, so `pip install .` (apps and tests off) does not.
# Defines the targets CLI11::CLI11 and nlohmann_json::nlohmann_json.

# The package's CMake config where it has one; else the header on the include
# path (an INTERFACE target of our own); else a FATAL_ERROR naming the package.
function(dash_find_header_only package target header debian_package)
  find_package(${package} CONFIG QUIET)
  if(TARGET ${target})
    return()
  endif()
  find_path(DASH_${package}_INCLUDE_DIR ${header})
  if(NOT DASH_${package}_INCLUDE_DIR)
    message(FATAL_ERROR "${package} not found (${header}): install the Debian package ${debian_package} "
                        "(scripts/install_deps.sh does), or point CMAKE_PREFIX_PATH at an installation")
  endif()
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  target_include_directories(${target} INTERFACE "${DASH_${package}_INCLUDE_DIR}")
endfunction()

dash_find_header_only(nlohmann_json nlohmann_json::nlohmann_json nlohmann/json.hpp nlohmann-json3-dev)
if(DASH_BUILD_APPS)
  dash_find_header_only(CLI11 CLI11::CLI11 CLI/CLI.hpp libcli11-dev)
endif()

# Release builds link SQLite, yaml-cpp, re2, jemalloc, spdlog and fmt into
# the programs instead of loading them as shared libraries, and `steps` and
# `mock_provider` take libstdc++ and libgcc in as well. Every `steps` command
# starts a process, and every run starts it with the store, the YAML reader
# and the log: on the reference machine (2 cores, a virtual machine whose page
# faults are dear) the dynamic loader's mapping and relocating of nine
# libraries was a third of what `steps --version` costs. The README's
# performance section has the figures and the command that measures them.
#
# The archives come from the same Debian packages as the shared libraries
# (scripts/install-deps). libcurl stays shared: `steps` loads it only when a
# run first speaks HTTP (core/libcurl.h). steps-ui keeps the shared libstdc++
# because cpp-httplib, which it links, is a shared library built against it.

if(NOT CMAKE_BUILD_TYPE STREQUAL "Release" OR STEPS_SANITIZE OR STEPS_FUZZ)
  set(STEPS_STATIC_DEPS_DEFAULT OFF)
else()
  set(STEPS_STATIC_DEPS_DEFAULT ON)
endif()
option(STEPS_STATIC_DEPS
  "Link SQLite, yaml-cpp, re2, jemalloc, spdlog, fmt and libstdc++ statically (Release default)"
  ${STEPS_STATIC_DEPS_DEFAULT})

# spdlog with fmt, both from their headers: no archive of either is packaged.
add_library(steps_spdlog INTERFACE)
if(STEPS_STATIC_DEPS)
  target_compile_definitions(steps_spdlog INTERFACE SPDLOG_FMT_EXTERNAL FMT_HEADER_ONLY)
  target_link_libraries(steps_spdlog INTERFACE Threads::Threads)
else()
  target_link_libraries(steps_spdlog INTERFACE spdlog::spdlog)
endif()

if(NOT STEPS_STATIC_DEPS)
  return()
endif()

function(steps_static_archive var name)
  find_library(${var} NAMES ${name} NO_CACHE)
  if(NOT ${var})
    message(FATAL_ERROR "STEPS_STATIC_DEPS: ${name} not found (scripts/install-deps "
      "installs it; configure with -DSTEPS_STATIC_DEPS=OFF to link the shared libraries)")
  endif()
  set(${var} ${${var}} PARENT_SCOPE)
endfunction()

steps_static_archive(STEPS_SQLITE_A libsqlite3.a)
set_target_properties(SQLite::SQLite3 PROPERTIES IMPORTED_LOCATION ${STEPS_SQLITE_A})
set_property(TARGET SQLite::SQLite3 APPEND PROPERTY INTERFACE_LINK_LIBRARIES
  Threads::Threads m ${CMAKE_DL_LIBS})

steps_static_archive(STEPS_YAML_CPP_A libyaml-cpp.a)
get_target_property(configs yaml-cpp IMPORTED_CONFIGURATIONS)
foreach(config IN LISTS configs)
  set_target_properties(yaml-cpp PROPERTIES IMPORTED_LOCATION_${config} ${STEPS_YAML_CPP_A})
endforeach()
set_target_properties(yaml-cpp PROPERTIES IMPORTED_LOCATION ${STEPS_YAML_CPP_A})

steps_static_archive(STEPS_RE2_A libre2.a)
set_target_properties(PkgConfig::RE2 PROPERTIES INTERFACE_LINK_LIBRARIES
  "${STEPS_RE2_A};Threads::Threads")

if(TARGET PkgConfig::JEMALLOC)
  # The archive built as position-independent code, as a PIE needs.
  steps_static_archive(STEPS_JEMALLOC_A libjemalloc_pic.a)
  set_target_properties(PkgConfig::JEMALLOC PROPERTIES INTERFACE_LINK_LIBRARIES
    "${STEPS_JEMALLOC_A};Threads::Threads;m;${CMAKE_DL_LIBS}")
endif()

# nmkit_warnings(target): nmkit's own code builds warning-free (as errors with NMKIT_WERROR).
# C++ sources only: nvcc takes other flags, and CUTLASS's templates are not warning-free.
function(nmkit_warnings target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow
                         -Wconversion -Wno-sign-conversion $<$<BOOL:${NMKIT_WERROR}>:-Werror>>)
endfunction()

include(GNUInstallDirs)

# nmkit_module(name DEPS ...): static library nmkit_<name> from src/<name>/*.cc.
function(nmkit_module name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cc)
  if(NOT sources)  # a module not yet written links as nothing
    add_library(nmkit_${name} INTERFACE)
    target_link_libraries(nmkit_${name} INTERFACE ${ARG_DEPS})
    return()
  endif()
  add_library(nmkit_${name} STATIC ${sources})
  target_include_directories(nmkit_${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                             $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}> PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(nmkit_${name} PUBLIC ${ARG_DEPS})
  nmkit_warnings(nmkit_${name})
endfunction()

# nmkit_test(name DEPS ...): GoogleTest executable nmkit_test_<name> from tests/<name>/*.cc plus the
# shared helpers in tests/util, registered with CTest test by test.
function(nmkit_test name)
  cmake_parse_arguments(ARG "" "" "DEPS;ISA_TIERS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/${name}/*.cc)
  add_executable(nmkit_test_${name} ${sources})
  # Tests include their helpers as "tests/<folder>/X.h" and src-internal headers as "src/<module>/X.h"
  # (both from the repository root); src stays on the path for the src headers' own includes.
  target_include_directories(nmkit_test_${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(nmkit_test_${name} PRIVATE ${ARG_DEPS} nmkit_test_util GTest::gtest_main)
  nmkit_warnings(nmkit_test_${name})
  if(ARG_ISA_TIERS)
    # Kernel suites run once per ISA tier; a tier this machine lacks skips its tests.
    foreach(tier ${ARG_ISA_TIERS})
      gtest_discover_tests(nmkit_test_${name} TEST_SUFFIX ".${tier}"
                           PROPERTIES ENVIRONMENT "NMKIT_ISA=${tier}" DISCOVERY_TIMEOUT 60)
    endforeach()
  else()
    gtest_discover_tests(nmkit_test_${name} DISCOVERY_TIMEOUT 60)
  endif()
endfunction()

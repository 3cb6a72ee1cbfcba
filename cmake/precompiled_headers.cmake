# Precompiled headers. Most of gantry's translation units spend more time parsing
# gRPC, protobuf, the generated gantry.v1 headers and (in workers/) LibTorch than compiling their own
# code; each family below precompiles those headers once and every target of the family reuses the
# result (docs/studies/2026-11-28-build-and-test-time.md has what it saves).
#
# A family is (headers) x (test code or not): test code compiles at -O1 with GoogleTest's definitions,
# the rest at the build type's flags, and a precompiled header is only used with the flags it was made
# with (GCC falls back to parsing the headers otherwise). Every target's family follows from what it
# links: LibTorch (gantry_gan) -> torch, gantry_proto -> grpc, neither -> none.
#
# In the sanitizer build (GANTRY_SANITIZER_FLAGS) the same split matches its flags: the code under
# test is instrumented and the test code is not (tests/ resets the directory's options), so a
# family's host takes the flags of the code it serves. Targets with flags of their own (the
# libFuzzer targets, protoc's output) parse the headers themselves: clang refuses a precompiled
# header made with other sanitizer flags, where GCC would fall back with a warning.

set(gantry_pch_grpc_headers
    <grpcpp/grpcpp.h> <google/protobuf/message.h> <absl/status/status.h> <absl/status/statusor.h>
    <absl/strings/str_cat.h> <absl/strings/str_format.h> <absl/synchronization/mutex.h>
    <absl/time/time.h> <functional> <map> <memory> <sstream> <string> <vector>)
file(GLOB gantry_pch_protos RELATIVE ${CMAKE_SOURCE_DIR}/proto ${CMAKE_SOURCE_DIR}/proto/gantry/v1/*.proto)
foreach(proto IN LISTS gantry_pch_protos)
  string(REGEX REPLACE "\\.proto$" ".grpc.pb.h" header "${proto}")
  list(APPEND gantry_pch_grpc_headers "\"${header}\"")
endforeach()
set(gantry_pch_torch_headers ${gantry_pch_grpc_headers} <ATen/ATen.h> <torch/nn/module.h>)

# The targets that link `target`, directly or not (non-imported targets only).
function(gantry_pch_links target out)
  set(seen ${${out}})
  get_target_property(direct ${target} LINK_LIBRARIES)
  get_target_property(iface ${target} INTERFACE_LINK_LIBRARIES)
  foreach(dep IN LISTS direct iface)
    if(TARGET ${dep} AND NOT dep IN_LIST seen)
      list(APPEND seen ${dep})
      get_target_property(imported ${dep} IMPORTED)
      if(NOT imported)
        gantry_pch_links(${dep} seen)
      endif()
    endif()
  endforeach()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

# The host of a family: a one-file library with the family's flags that makes the precompiled header.
function(gantry_pch_host family headers is_test)
  set(host gantry_pch_${family})
  file(WRITE ${CMAKE_BINARY_DIR}/pch/${family}.cc "// The precompiled header host of ${family}.\n")
  add_library(${host} STATIC ${CMAKE_BINARY_DIR}/pch/${family}.cc)
  target_include_directories(${host} PRIVATE ${CMAKE_SOURCE_DIR})
  target_link_libraries(${host} PRIVATE gantry_proto gRPC::grpc++ absl::status absl::statusor
                                        absl::strings absl::str_format absl::synchronization absl::time)
  if(family MATCHES "^torch")
    target_link_libraries(${host} PRIVATE torch)
  endif()
  if(is_test)
    # Test code has none of the directory's instrumentation (tests/CMakeLists.txt).
    set_property(TARGET ${host} PROPERTY COMPILE_OPTIONS "")
    target_link_libraries(${host} PRIVATE GTest::gtest)
    target_compile_options(${host} PRIVATE ${GANTRY_TEST_COMPILE_OPTIONS})
    list(APPEND headers <gtest/gtest.h>)
  endif()
  # clang records the headers' modification times in a precompiled header and refuses it when they
  # differ: a header from the compiler cache would then fail in every new clone.
  target_compile_options(${host}
                         PRIVATE "$<$<CXX_COMPILER_ID:Clang>:SHELL:-Xclang -fno-pch-timestamp>")
  target_precompile_headers(${host} PRIVATE ${headers})
  # A new precompiled header is made without the old one beside it (the script says why).
  set_property(TARGET ${host} PROPERTY CXX_COMPILER_LAUNCHER
               ${CMAKE_SOURCE_DIR}/cmake/fresh_pch_launcher.sh ${CMAKE_CXX_COMPILER_LAUNCHER})
endfunction()

# Every target with C++ sources that links gRPC reuses its family's precompiled header.
function(gantry_pch_apply)
  gantry_targets_under(${CMAKE_SOURCE_DIR} targets)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|OBJECT_LIBRARY)$" OR t MATCHES "^gantry_pch_")
      continue()
    endif()
    get_target_property(sources ${t} SOURCES)
    if(NOT sources MATCHES "\\.cc")
      continue()
    endif()
    get_target_property(test_code ${t} GANTRY_TEST_CODE)
    get_target_property(options ${t} COMPILE_OPTIONS)
    get_target_property(dir ${t} SOURCE_DIR)
    # In the sanitizer build a target's instrumentation must be its family's: test code has none,
    # the rest has the directory's. Others (fuzzers, protoc's output, benchmarks under tests/) skip.
    if(GANTRY_SANITIZER_FLAGS)
      set(instrumented OFF)
      if(options MATCHES "-fsanitize=address")
        set(instrumented ON)
      endif()
      if((test_code AND options MATCHES "-fsanitize") OR (NOT test_code AND NOT instrumented)
         OR dir STREQUAL "${CMAKE_SOURCE_DIR}/proto")
        continue()
      endif()
    endif()
    set(links "")
    gantry_pch_links(${t} links)
    if("gantry_gan" IN_LIST links OR t STREQUAL "gantry_gan"
       OR ("torch" IN_LIST links AND "gantry_proto" IN_LIST links))
      set(family torch)
    elseif("gantry_proto" IN_LIST links)
      set(family grpc)
    else()
      continue()
    endif()
    # Test code compiles at -O1 (tests/CMakeLists.txt marks it).
    if(test_code)
      string(APPEND family _test)
      # The test family's header is made with GTest's compile definitions: a test helper that does
      # not link GTest (a fake rank, a fixture writer) takes them too, or GCC refuses the header
      # (-Winvalid-pch) and parses every include itself.
      if(NOT "GTest::gtest" IN_LIST links AND NOT "GTest::gtest_main" IN_LIST links)
        target_compile_definitions(${t} PRIVATE GTEST_HAS_PTHREAD=1)
      endif()
    endif()
    target_precompile_headers(${t} REUSE_FROM gantry_pch_${family})
    # A precompiled header GCC cannot use is a warning, not a silent fall back to parsing.
    target_compile_options(${t} PRIVATE -Winvalid-pch)
  endforeach()
endfunction()

gantry_pch_host(grpc "${gantry_pch_grpc_headers}" OFF)
gantry_pch_host(grpc_test "${gantry_pch_grpc_headers}" ON)
if(GANTRY_WITH_TORCH)
  gantry_pch_host(torch "${gantry_pch_torch_headers}" OFF)
  gantry_pch_host(torch_test "${gantry_pch_torch_headers}" ON)
endif()
gantry_pch_apply()

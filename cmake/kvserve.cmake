# kvs_add_test(NAME name SOURCES a.cc b.cc LIBS lib... [LABELS l...] [ISAS isa... [ISA_ARGS arg...]] [SANITIZED_ARGS arg...])
# Builds a GoogleTest binary and registers its tests with CTest. Tests find
# ../shared through the KVSERVE_SHARED_DIR environment variable and the
# source tree through KVSERVE_SOURCE_DIR. Each ISAS entry (scalar, avx2)
# registers the binary once more as name_isa_<isa> with KVSERVE_ISA=<isa>
# (and ISA_ARGS, e.g. a --gtest_filter), so the kernel paths of CPUs without
# AVX-512 run on this one too. SANITIZED_ARGS (e.g. a --gtest_filter) are
# passed in sanitizer trees only: a test whose cases differ in data, not in
# code paths, runs a representative part under the sanitizers (the Release
# tree runs every case), and the ctest command line says which.
function(kvs_add_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;LABELS;ISAS;ISA_ARGS;SANITIZED_ARGS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main Threads::Threads)
  if(CMAKE_BUILD_TYPE STREQUAL "Release")
    # The tests' own code (GoogleTest macros, fixtures, references) compiles
    # ~20 % faster at -O1 and runs no slower for it; the code under test is
    # in the libraries, at the build's -O2.
    target_compile_options(${T_NAME} PRIVATE -O1)
  endif()
  if(KVSERVE_SANITIZE MATCHES "address")
    # The tests' own sources (GoogleTest macros, fixtures, references) are
    # built without ASan and UBSan: instrumenting them was 40 % of the
    # sanitizer tree's compile time (a test file: 16 s instrumented, 9 s
    # not). The code under test is in the libraries (and the fakes in the
    # testing libraries), instrumented with both; the binary links both
    # runtimes, so every heap block, whoever allocates it, has ASan's
    # redzones. Not done for TSan: a test's unseen accesses and atomics
    # would hide races and invent false ones.
    target_compile_options(${T_NAME} PRIVATE -fno-sanitize=address,undefined)
  endif()
  kvs_fuzz_coverage_off(${T_NAME})
  set(env "KVSERVE_SHARED_DIR=${KVSERVE_SHARED_DIR};KVSERVE_SOURCE_DIR=${KVSERVE_SOURCE_DIR};KVSERVE_BINARY_DIR=${CMAKE_BINARY_DIR}")
  set(args "")
  if(KVSERVE_SANITIZE)
    set(args ${T_SANITIZED_ARGS})
  endif()
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${args})
  set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "${env}" LABELS "${T_LABELS}" TIMEOUT 900)
  foreach(isa IN LISTS T_ISAS)
    add_test(NAME ${T_NAME}_isa_${isa} COMMAND ${T_NAME} ${T_ISA_ARGS})
    # Label isa_variant: the sanitizer stage of scripts/test.sh leaves these
    # reruns out (kernels_test and paged_attention_test run every variant's
    # kernels under the sanitizers; the Release stage runs these reruns).
    set_tests_properties(${T_NAME}_isa_${isa} PROPERTIES ENVIRONMENT "${env};KVSERVE_ISA=${isa}"
                         LABELS "${T_LABELS};isa_variant" TIMEOUT 900)
  endforeach()
endfunction()

# kvs_fuzz_coverage_off(target): in a tree built for both the sanitizer tests
# and the fuzzers (KVSERVE_FUZZ with KVSERVE_SANITIZE), `target` keeps the
# sanitizers but not libFuzzer's coverage instrumentation: compute code that
# no fuzzer drives, where it would only slow the tests.
function(kvs_fuzz_coverage_off target)
  if(KVSERVE_FUZZ AND KVSERVE_SANITIZE)
    target_compile_options(${target} PRIVATE -fno-sanitize=fuzzer-no-link)
  endif()
endfunction()

# kvs_add_library(name SOURCES ... DEPS ...)
function(kvs_add_library name)
  cmake_parse_arguments(L "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${L_SOURCES})
  target_link_libraries(${name} PUBLIC ${L_DEPS})
endfunction()

# kvs_add_fuzzer(NAME x_fuzzer SOURCES a.cc LIBS lib... SEEDS dir [MAX_LEN n])
# A libFuzzer target, built only with -DKVSERVE_FUZZ=ON (clang; the whole
# build is then instrumented). SEEDS is the committed seed corpus (relative to
# the calling CMakeLists.txt). scripts/fuzz.sh runs every registered fuzzer.
function(kvs_add_fuzzer)
  if(NOT KVSERVE_FUZZ)
    return()
  endif()
  cmake_parse_arguments(F "" "NAME;SEEDS;MAX_LEN" "SOURCES;LIBS" ${ARGN})
  if(NOT F_MAX_LEN)
    set(F_MAX_LEN 65536)
  endif()
  add_executable(${F_NAME} ${F_SOURCES})
  target_link_libraries(${F_NAME} PRIVATE ${F_LIBS})
  target_link_options(${F_NAME} PRIVATE -fsanitize=fuzzer)
  # Fuzzers that read ../shared (vocabularies) find it here or through
  # $KVSERVE_SHARED_DIR, and skip their inputs when it is absent.
  target_compile_definitions(${F_NAME} PRIVATE KVSERVE_SHARED_DIR="${KVSERVE_SHARED_DIR}")
  set_property(GLOBAL APPEND PROPERTY KVS_FUZZERS
    "${F_NAME}\t$<TARGET_FILE:${F_NAME}>\t${CMAKE_CURRENT_SOURCE_DIR}/${F_SEEDS}\t${F_MAX_LEN}")
endfunction()

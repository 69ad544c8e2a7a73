# kvs_add_test(NAME name SOURCES a.cc b.cc LIBS lib... [LABELS l...])
# Builds a GoogleTest binary and registers its tests with CTest. Tests find
# ../shared through the KVSERVE_SHARED_DIR environment variable and the
# source tree through KVSERVE_SOURCE_DIR.
function(kvs_add_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main Threads::Threads)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  set_tests_properties(${T_NAME} PROPERTIES
    ENVIRONMENT "KVSERVE_SHARED_DIR=${KVSERVE_SHARED_DIR};KVSERVE_SOURCE_DIR=${KVSERVE_SOURCE_DIR};KVSERVE_BINARY_DIR=${CMAKE_BINARY_DIR}"
    LABELS "${T_LABELS}"
    TIMEOUT 900)
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

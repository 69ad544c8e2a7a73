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

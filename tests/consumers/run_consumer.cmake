# cmake -DMODE=find_package|add_subdirectory -DWORK_DIR=... [options] -P run_consumer.cmake
#
# Builds and runs one consumer project of this folder against the tessel
# being tested, from scratch in WORK_DIR:
#   find_package:     cmake --install TESSEL_BINARY_DIR into WORK_DIR/prefix,
#                     then the consumer finds it with CMAKE_PREFIX_PATH;
#   add_subdirectory: the consumer adds TESSEL_SOURCE_DIR as a subdirectory.
# Options: TESSEL_SOURCE_DIR, TESSEL_BINARY_DIR, CONFIG, GENERATOR,
# MAKE_PROGRAM, CXX_COMPILER.
cmake_minimum_required(VERSION 3.25)

foreach(var MODE WORK_DIR TESSEL_SOURCE_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_consumer.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT CONFIG)
  set(CONFIG Release)
endif()

function(run)
  string(REPLACE ";" " " shown "${ARGN}")
  message(STATUS "consumer ${MODE}: ${shown}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer ${MODE}: failed (${rc}): ${shown}")
  endif()
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(build_dir "${WORK_DIR}/build")
set(configure_args -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=${CONFIG}
                   -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
if(MAKE_PROGRAM)
  list(APPEND configure_args -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()

if(MODE STREQUAL "find_package")
  set(prefix "${WORK_DIR}/prefix")
  run(${CMAKE_COMMAND} --install "${TESSEL_BINARY_DIR}" --prefix "${prefix}" --config ${CONFIG})
  foreach(file include/tessel/tessel.hpp)
    if(NOT EXISTS "${prefix}/${file}")
      message(FATAL_ERROR "consumer ${MODE}: ${file} was not installed")
    endif()
  endforeach()
  list(APPEND configure_args "-DCMAKE_PREFIX_PATH=${prefix}")
elseif(MODE STREQUAL "add_subdirectory")
  # tessel::core is compiled again here: with no build type (no -O, no -g),
  # the fastest to compile; what is checked is the build, not the code.
  list(REMOVE_ITEM configure_args -DCMAKE_BUILD_TYPE=${CONFIG})
  list(APPEND configure_args -DCMAKE_BUILD_TYPE= "-DTESSEL_SOURCE_DIR=${TESSEL_SOURCE_DIR}")
else()
  message(FATAL_ERROR "run_consumer.cmake: unknown MODE '${MODE}'")
endif()

run(${CMAKE_COMMAND} -S "${CMAKE_CURRENT_LIST_DIR}/${MODE}" -B "${build_dir}" ${configure_args})
run(${CMAKE_COMMAND} --build "${build_dir}" --config ${CONFIG} --target consumer)
if(EXISTS "${build_dir}/${CONFIG}/consumer${CMAKE_EXECUTABLE_SUFFIX}")
  run("${build_dir}/${CONFIG}/consumer${CMAKE_EXECUTABLE_SUFFIX}")
else()
  run("${build_dir}/consumer${CMAKE_EXECUTABLE_SUFFIX}")
endif()

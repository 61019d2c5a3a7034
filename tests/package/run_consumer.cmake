# Builds and runs a consumer project against lockscope, as ctest's package.* tests.
#
#   cmake -DMODE=find_package|add_subdirectory -DLOCKSCOPE_BUILD_DIR=... \
#         -DLOCKSCOPE_SOURCE_DIR=... -DWORK_DIR=... -DCXX_COMPILER=... \
#         [-DMAKE_PROGRAM=...] [-DSANITIZE=address,...] -P run_consumer.cmake
#
# find_package: installs the current build tree into WORK_DIR/prefix, then builds
# consumer/ with CMAKE_PREFIX_PATH pointing there (and nowhere else).
# add_subdirectory: builds subdir_consumer/, which vendors LOCKSCOPE_SOURCE_DIR.
cmake_minimum_required(VERSION 3.25)

foreach(required MODE LOCKSCOPE_BUILD_DIR LOCKSCOPE_SOURCE_DIR WORK_DIR CXX_COMPILER)
  if(NOT DEFINED ${required} OR "${${required}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer.cmake: -D${required}=... is required")
  endif()
endforeach()

set(step_timeout 150)

# Runs a command; on failure prints its output and stops the script.
function(run_step name)
  string(JOIN " " shown ${ARGN})
  message(STATUS "[${name}] ${shown}")
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output
    TIMEOUT ${step_timeout})
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "[${name}] failed (${result}):\n${output}")
  endif()
  set(step_output "${output}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(consumer_build "${WORK_DIR}/build")

set(configure_args -G Ninja -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
  # Nothing from the user's or system's package registry may stand in for the install.
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
if(MAKE_PROGRAM)
  list(APPEND configure_args -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
# A sanitized lockscope library needs a consumer linked with the same runtime.
if(SANITIZE)
  list(APPEND configure_args "-DCMAKE_CXX_FLAGS=-fsanitize=${SANITIZE}"
    "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZE}")
endif()

if(MODE STREQUAL "find_package")
  set(prefix "${WORK_DIR}/prefix")
  run_step(install ${CMAKE_COMMAND} --install "${LOCKSCOPE_BUILD_DIR}" --prefix "${prefix}")
  file(GLOB_RECURSE config_files "${prefix}/*/lockscopeConfig.cmake")
  if(NOT config_files)
    message(FATAL_ERROR "the install has no lockscopeConfig.cmake:\n${step_output}")
  endif()
  foreach(installed include/lockscope/resp/decoder.hpp include/lockscope/resp/value.hpp)
    if(NOT EXISTS "${prefix}/${installed}")
      message(FATAL_ERROR "the install lacks ${installed}")
    endif()
  endforeach()
  set(source "${CMAKE_CURRENT_LIST_DIR}/consumer")
  list(APPEND configure_args "-DCMAKE_PREFIX_PATH=${prefix}")
elseif(MODE STREQUAL "add_subdirectory")
  set(source "${CMAKE_CURRENT_LIST_DIR}/subdir_consumer")
  list(APPEND configure_args "-DLOCKSCOPE_SOURCE_DIR=${LOCKSCOPE_SOURCE_DIR}")
else()
  message(FATAL_ERROR "MODE must be find_package or add_subdirectory, not '${MODE}'")
endif()

run_step(configure ${CMAKE_COMMAND} -S "${source}" -B "${consumer_build}" ${configure_args})
if(MODE STREQUAL "find_package")
  # The package must be the one just installed, not one found elsewhere.
  file(STRINGS "${consumer_build}/CMakeCache.txt" found_dir REGEX "^lockscope_DIR:")
  string(FIND "${found_dir}" "${prefix}/" at)
  if(NOT at GREATER -1)
    message(FATAL_ERROR "find_package used '${found_dir}', not the install in ${prefix}")
  endif()
endif()
if(MODE STREQUAL "find_package")
  run_step(build ${CMAKE_COMMAND} --build "${consumer_build}")
else()
  # Only the consumer and what it links: building the vendored tree's other
  # libraries from source would only make the test slower.
  run_step(build ${CMAKE_COMMAND} --build "${consumer_build}" --target app)
endif()
run_step(run "${consumer_build}/app")
message(STATUS "${step_output}")
if(NOT step_output MATCHES "lockscope consumer ok")
  message(FATAL_ERROR "the consumer printed no success line")
endif()

# Keep the tree only when something failed (FATAL_ERROR above skips this).
file(REMOVE_RECURSE "${WORK_DIR}")

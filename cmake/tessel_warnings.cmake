option(TESSEL_WARNINGS_AS_ERRORS "Treat compiler warnings of tessel targets as errors" OFF)

# tessel_set_warnings(target): the warning set every tessel target compiles with
# (and -Werror / /WX when TESSEL_WARNINGS_AS_ERRORS is ON, as in the ci preset).
function(tessel_set_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
                           -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
                           -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
       AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
      # GCC 12 at -O2/-O3 warns on libstdc++'s own `"x" + std::string` (bogus
      # -Wrestrict, GCC PR 105329, fixed in 13): Debian 12's compiler.
      target_compile_options(${target} PRIVATE -Wno-restrict)
    endif()
    if(TESSEL_WARNINGS_AS_ERRORS)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  elseif(MSVC)
    target_compile_options(${target} PRIVATE /W4 /permissive-)
    if(TESSEL_WARNINGS_AS_ERRORS)
      target_compile_options(${target} PRIVATE /WX)
    endif()
  endif()
endfunction()

# tessel_add_module(name SOURCES...): a compiled tessel library exported as tessel::<name>.
function(tessel_add_module name)
  add_library(tessel_${name} ${ARGN})
  add_library(tessel::${name} ALIAS tessel_${name})
  set_target_properties(tessel_${name} PROPERTIES EXPORT_NAME ${name} POSITION_INDEPENDENT_CODE ON)
  target_include_directories(tessel_${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(tessel_${name} PUBLIC cxx_std_20)
  tessel_set_warnings(tessel_${name})
endfunction()

# Install rules and the exported CMake package (find_package(tessel)).
# Included by the top CMakeLists.txt, after every module, when TESSEL_INSTALL is ON.
#
# Installs: include/tessel/, the module libraries (tessel::core, tessel::dsl,
# tessel::strategies, tessel::backends, whichever exist), tessel::tessel (all of
# them), the `tessel` tool, and <libdir>/cmake/tessel/{tesselConfig,
# tesselConfigVersion,tesselTargets}.cmake.
include(CMakePackageConfigHelpers)

set(TESSEL_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/tessel"
    CACHE STRING "Where tesselConfig.cmake is installed, relative to the prefix")
mark_as_advanced(TESSEL_INSTALL_CMAKEDIR)

set(_tessel_exported)
foreach(target IN ITEMS tessel_core tessel_dsl ${TESSEL_MODULES} tessel_all)
  if(TARGET ${target} AND NOT target IN_LIST _tessel_exported)
    list(APPEND _tessel_exported ${target})
  endif()
endforeach()

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/tessel"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        COMPONENT tessel_development
        FILES_MATCHING PATTERN "*.hpp")

# The trainium backend's device-side runner (python/tessel_trainium); the NKI
# stand-in under tests/ is never installed.
install(DIRECTORY "${PROJECT_SOURCE_DIR}/python/tessel_trainium"
        DESTINATION "${CMAKE_INSTALL_DATADIR}/tessel/python"
        COMPONENT tessel_runtime
        FILES_MATCHING PATTERN "*.py")

install(TARGETS ${_tessel_exported}
        EXPORT tesselTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT tessel_development
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT tessel_runtime
                NAMELINK_COMPONENT tessel_development
        RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT tessel_runtime
        INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")

if(TARGET tessel_cli)
  if(BUILD_SHARED_LIBS AND NOT APPLE)
    set_target_properties(tessel_cli PROPERTIES
      INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  endif()
  install(TARGETS tessel_cli RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT tessel_runtime)
endif()

install(EXPORT tesselTargets
        NAMESPACE tessel::
        FILE tesselTargets.cmake
        DESTINATION "${TESSEL_INSTALL_CMAKEDIR}"
        COMPONENT tessel_development)

# --- the dependencies tesselConfig.cmake must re-find ------------------------
# Every imported target an exported target links, directly or through another
# tessel target. A static library's PRIVATE links are exported too, as
# $<LINK_ONLY:dep>, so they need find_dependency as well; a shared library's
# PRIVATE links are not, so they are skipped. Computed, not listed, so a module
# adding a dependency cannot silently break installed consumers.
#
# How to re-find each package, by the namespace of its targets
# (the arguments match cmake/tessel_dependencies.cmake).
set(_tessel_dep_Boost "Boost 1.74")
set(_tessel_dep_Eigen3 "Eigen3 3.3 NO_MODULE")
set(_tessel_dep_NLopt "NLopt")
set(_tessel_dep_TBB "TBB")
set(_tessel_dep_range-v3 "range-v3")
set(_tessel_dep_nlohmann_json "nlohmann_json 3.10")
set(_tessel_dep_CLI11 "CLI11")
set(_tessel_dep_fmt "fmt")
set(_tessel_dep_SQLite "SQLite3")
set(_tessel_dep_PostgreSQL "PostgreSQL")
set(_tessel_dep_ZLIB "ZLIB")
set(_tessel_dep_Threads "Threads")
set(_tessel_dep_OpenSSL "OpenSSL 3 COMPONENTS Crypto")

# _tessel_collect_links(target): adds to the global property
# TESSEL_EXPORT_PACKAGES the package of every imported target in target's link
# interface, recursing into tessel's own targets.
function(_tessel_collect_links target)
  get_property(seen GLOBAL PROPERTY TESSEL_EXPORT_SEEN)
  if(target IN_LIST seen)
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY TESSEL_EXPORT_SEEN ${target})
  get_target_property(links ${target} INTERFACE_LINK_LIBRARIES)
  if(NOT links)
    return()
  endif()
  foreach(link IN LISTS links)
    # $<LINK_ONLY:x> is exported; $<BUILD_INTERFACE:x> is not, nor is a
    # PRIVATE one (a static library's $<LINK_ONLY:$<BUILD_INTERFACE:x>>).
    string(REGEX REPLACE "^\\$<(LINK_ONLY|INSTALL_INTERFACE):(.*)>$" "\\2" link "${link}")
    if(link MATCHES "^\\$<BUILD_INTERFACE:")
      continue()
    endif()
    if(link MATCHES "^\\$<")
      message(WARNING "tessel install: ${target} links '${link}', a generator expression "
                      "cmake/tessel_install.cmake does not read; tesselConfig does not re-find it")
      continue()
    endif()
    if(TARGET "${link}")
      get_target_property(imported "${link}" IMPORTED)
      if(NOT imported)
        # One of ours (e.g. tessel::core): exported too; its links count.
        get_target_property(aliased "${link}" ALIASED_TARGET)
        if(aliased)
          set(link "${aliased}")
        endif()
        _tessel_collect_links("${link}")
        continue()
      endif()
    endif()
    if(link MATCHES "^([^:]+)::")
      set(ns "${CMAKE_MATCH_1}")
      if(DEFINED _tessel_dep_${ns})
        set_property(GLOBAL APPEND PROPERTY TESSEL_EXPORT_PACKAGES "${_tessel_dep_${ns}}")
      else()
        message(WARNING "tessel install: ${target} links ${link}; say how to find its package "
                        "(_tessel_dep_${ns}) in cmake/tessel_install.cmake")
      endif()
    endif()
    # Anything else is a plain system library (m, dl) or a path: exported as is.
  endforeach()
endfunction()

set_property(GLOBAL PROPERTY TESSEL_EXPORT_SEEN "")
set_property(GLOBAL PROPERTY TESSEL_EXPORT_PACKAGES "")
foreach(target IN LISTS _tessel_exported)
  _tessel_collect_links(${target})
endforeach()
get_property(_tessel_packages GLOBAL PROPERTY TESSEL_EXPORT_PACKAGES)
list(REMOVE_DUPLICATES _tessel_packages)
list(SORT _tessel_packages)

set(TESSEL_FIND_DEPENDENCIES "")
foreach(package IN LISTS _tessel_packages)
  string(APPEND TESSEL_FIND_DEPENDENCIES "find_dependency(${package})\n")
endforeach()
message(STATUS "tessel install: tesselConfig.cmake re-finds: ${_tessel_packages}")
get_target_property(_tessel_core_type tessel_core TYPE)
string(REPLACE "_LIBRARY" "" TESSEL_LIBRARY_TYPE "${_tessel_core_type}")

configure_package_config_file(
  "${CMAKE_CURRENT_LIST_DIR}/tesselConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/cmake/tesselConfig.cmake"
  INSTALL_DESTINATION "${TESSEL_INSTALL_CMAKEDIR}")
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/cmake/tesselConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMajorVersion)
install(FILES "${PROJECT_BINARY_DIR}/cmake/tesselConfig.cmake"
              "${PROJECT_BINARY_DIR}/cmake/tesselConfigVersion.cmake"
        DESTINATION "${TESSEL_INSTALL_CMAKEDIR}"
        COMPONENT tessel_development)

# cmake -DINCLUDE_DIR=<repo>/include -P check_umbrella.cmake
# Fails when tessel/tessel.hpp does not include every public header under
# include/tessel/ (headers under a detail/ folder are internal and skipped),
# or includes one that does not exist.
file(GLOB_RECURSE headers RELATIVE ${INCLUDE_DIR} ${INCLUDE_DIR}/tessel/*.hpp)
list(FILTER headers EXCLUDE REGEX "/detail/|^tessel/tessel\\.hpp$")
file(STRINGS ${INCLUDE_DIR}/tessel/tessel.hpp lines REGEX "^#include <tessel/")
set(included)
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^#include <([^>]+)>.*$" "\\1" header "${line}")
  list(APPEND included ${header})
endforeach()
set(missing ${headers})
list(REMOVE_ITEM missing ${included})
set(stale ${included})
list(REMOVE_ITEM stale ${headers})
if(missing OR stale)
  message(FATAL_ERROR "include/tessel/tessel.hpp is out of date:"
                      " add ${missing}; remove ${stale}")
endif()
list(LENGTH headers n)
message(STATUS "tessel/tessel.hpp includes all ${n} public headers")

# Installs the MCP SDK client into DIR (cmake -DNPM=... -DNODE=... -DDIR=... -P
# npm_install.cmake): `npm ci` from the committed package-lock.json, skipped
# when DIR already holds the installed tree of that very lock file.
foreach(tool NODE NPM)
  if(NOT ${tool} OR NOT EXISTS "${${tool}}")
    string(TOLOWER ${tool} name)
    message(FATAL_ERROR "mcp test: '${name}' was not found; install the Debian packages nodejs "
                        "and npm (scripts/setup does) and configure again")
  endif()
endforeach()

set(stamp "${DIR}/node_modules/.tessel-lock")
file(READ "${DIR}/package-lock.json" lock)
if(EXISTS "${stamp}")
  file(READ "${stamp}" installed)
  if(installed STREQUAL lock AND EXISTS "${DIR}/node_modules/@modelcontextprotocol/sdk/package.json")
    message(STATUS "mcp test: the MCP SDK is already installed in ${DIR}")
    return()
  endif()
endif()

execute_process(COMMAND "${NPM}" ci --no-audit --no-fund --loglevel=error
                WORKING_DIRECTORY "${DIR}"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mcp test: 'npm ci' failed in ${DIR} (exit ${rc}); the MCP SDK client "
                      "(@modelcontextprotocol/sdk) comes from the npm registry, which must be "
                      "reachable (or set npm's registry/proxy configuration)")
endif()
file(WRITE "${stamp}" "${lock}")
message(STATUS "mcp test: installed the MCP SDK in ${DIR}")

# The design's dependencies, all from Debian packages (scripts/setup installs them).
# Public ones are re-found by tesselConfig.cmake; private ones stay inside compiled sources.
find_package(Boost 1.74 REQUIRED)                  # header-only: Spirit X3 (dsl/), Math (normal cdf)
find_package(Eigen3 3.3 REQUIRED NO_MODULE)        # private: strategies/bayesian, the sim newton_schulz executor
find_package(NLopt REQUIRED)                       # private: strategies/bayesian, sim calibration
find_package(TBB REQUIRED)                         # private to strategies: parallel GP fits, bo's pool
find_package(range-v3 REQUIRED)                    # header-only, private to strategies/bayesian
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(PostgreSQL REQUIRED)                  # libpq: the shared study store, private to src/storage
find_package(ZLIB REQUIRED)
find_package(Threads REQUIRED)
# The gate's keyed hash (HMAC-SHA256) and its secret (the CSPRNG), private to the core.
find_package(OpenSSL 3 REQUIRED COMPONENTS Crypto)

# The web catalog's list route against 1,000 seeded model versions, next to gRPC ListModels
# (run by hand with GANTRY_TEST_DSN; figures in docs/BENCHMARKS.md "Web catalog").
add_executable(catalog_http_bench ${CMAKE_CURRENT_LIST_DIR}/catalog_http_bench.cc)
target_link_libraries(catalog_http_bench PRIVATE gantry_server_test_harness gantry_storage
                      PkgConfig::HTTPLIB)

# The scheduler's fair share, quotas and reservations on a simulated cluster (pure, torch-free).
# Run by hand: build/tests/bench/fair_share_bench [--workers=1000] [--jobs=10000]; figures in
# docs/BENCHMARKS.md "Scheduler: fair share, quotas and reservations". A short version is in ctest.
add_library(gantry_fair_share_sim STATIC ${CMAKE_CURRENT_LIST_DIR}/fair_share_sim.cc)
target_include_directories(gantry_fair_share_sim PUBLIC ${CMAKE_SOURCE_DIR})
target_link_libraries(gantry_fair_share_sim PUBLIC gantry_scheduler PRIVATE absl::strings
                                                   absl::str_format)
add_executable(fair_share_bench ${CMAKE_CURRENT_LIST_DIR}/fair_share_bench.cc)
target_link_libraries(fair_share_bench PRIVATE gantry_fair_share_sim absl::strings)
add_executable(fair_share_sim_test ${CMAKE_CURRENT_LIST_DIR}/fair_share_sim_test.cc)
target_link_libraries(fair_share_sim_test PRIVATE gantry_fair_share_sim GTest::gtest
                                                  GTest::gtest_main)
gtest_discover_tests(fair_share_sim_test TEST_PREFIX "bench." DISCOVERY_TIMEOUT 60
                     PROPERTIES TIMEOUT 300)

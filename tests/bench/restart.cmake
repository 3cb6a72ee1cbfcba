# Restart figures through the whole service (real server, PostgreSQL, daemons, ranks); run by hand,
# figures in docs/BENCHMARKS.md "Restarts". Needs GANTRY_TEST_DSN (deploy/local/pg.sh start).
add_executable(restart_bench ${CMAKE_CURRENT_LIST_DIR}/restart_bench.cc)
target_link_libraries(restart_bench PRIVATE gantry_server_test_harness GTest::gtest_main)
gantry_test_paths(restart_bench PRIVATE GANTRY_WORKER_BINARY target:gantry-worker)
add_dependencies(restart_bench gantry-worker)

# The cost of validating every checkpoint (the validation curve), through the whole service; figures
# in docs/BENCHMARKS.md "Validation at checkpoints".
add_executable(validation_curve_bench ${CMAKE_CURRENT_LIST_DIR}/validation_curve_bench.cc)
target_link_libraries(validation_curve_bench PRIVATE gantry_server_test_harness GTest::gtest_main)
gantry_test_paths(validation_curve_bench PRIVATE GANTRY_WORKER_BINARY target:gantry-worker)
add_dependencies(validation_curve_bench gantry-worker)

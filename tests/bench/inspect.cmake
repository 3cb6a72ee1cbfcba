# The latency the sandboxed upload inspection adds (torch-free). Run by hand:
# build/tests/bench/inspect_bench [repeats]; figures go to docs/BENCHMARKS.md.
add_executable(inspect_bench ${CMAKE_CURRENT_LIST_DIR}/inspect_bench.cc)
target_link_libraries(inspect_bench PRIVATE gantry_server_lib gantry_showers)
gantry_test_paths(inspect_bench PRIVATE GANTRY_INSPECT_BINARY target:gantry-inspect)
add_dependencies(inspect_bench gantry-inspect)

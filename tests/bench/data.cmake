# Data benchmarks (torch-free): toy Monte Carlo showers/s per grid and thread count, HDF5 read/write
# throughput. Run by hand: build-<name>/tests/bench/toymc_bench; figures go to docs/BENCHMARKS.md.
add_executable(toymc_bench ${CMAKE_CURRENT_LIST_DIR}/toymc_bench.cc)
target_link_libraries(toymc_bench PRIVATE gantry_showers gantry_physics)

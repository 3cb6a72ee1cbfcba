# Input pipeline: data-stall fraction with and without prefetch on a cached dataset, cold
# against warm epochs (figures in docs/BENCHMARKS.md "Input pipeline"). Run by hand:
#   prefetch_bench --preset=tiny --steps=24 ; prefetch_bench --preset=3dgan-25 --batch=32 --steps=4
add_executable(prefetch_bench ${CMAKE_CURRENT_LIST_DIR}/prefetch_bench.cc)
target_link_libraries(prefetch_bench PRIVATE gantry_gan gantry_dataset_source)

# Generation serving on the worker, in-process: the dynamic batcher against the bare
# generator at batch 128 (figures in docs/BENCHMARKS.md "Generation serving on the worker").
#   serving_bench --threads=2 --bulk=1280 --clients=64 --seconds=6 --delays=0,1,2,5,10
add_executable(serving_bench ${CMAKE_CURRENT_LIST_DIR}/serving_bench.cc)
target_link_libraries(serving_bench PRIVATE gantry_serving_torch)

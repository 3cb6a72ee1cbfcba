# Generation through the whole service, torch-free: a gRPC client of gantry-server.
# tests/bench/run_generation_bench.sh starts the stack and runs it next to gan_generation_bench;
# figures in docs/BENCHMARKS.md "Generation service".
add_executable(generation_service_bench ${CMAKE_CURRENT_LIST_DIR}/generation_service_bench.cc)
target_include_directories(generation_service_bench PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(generation_service_bench PRIVATE gantry_proto Threads::Threads)

# An exported generator in a LibTorch consumer against gantry's own generation (figures in
# docs/BENCHMARKS.md "Exported generators"). Run by hand: export_consumer_bench --threads=1
add_executable(export_consumer_bench ${CMAKE_CURRENT_LIST_DIR}/export_consumer_bench.cc)
target_link_libraries(export_consumer_bench PRIVATE gantry_export gantry_gan)

# The study search algorithms on analytic objectives (pure computation, torch-free). Run by hand:
# build/tests/bench/study_search_bench [--seeds=10] [--timing-sizes=100,500]; figures in
# docs/BENCHMARKS.md "Study search algorithms".
add_executable(study_search_bench ${CMAKE_CURRENT_LIST_DIR}/study_search_bench.cc)
target_link_libraries(study_search_bench PRIVATE gantry_study_search absl::strings)

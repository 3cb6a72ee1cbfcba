# Benchmarks of the 3DGAN in LibTorch (plain timed mains; figures in docs/BENCHMARKS.md).
# tests/bench/run_gan_bench.sh runs them side by side with tests/bench/pytorch_3dgan.py.
foreach(name gan_generation_bench gan_training_bench compute_peak_bench)
  add_executable(${name} ${CMAKE_CURRENT_LIST_DIR}/${name}.cc)
  target_link_libraries(${name} PRIVATE gantry_gan)
endforeach()
# Data-parallel scaling: 2 ranks vs 1 rank, overlap on/off (figures in docs/BENCHMARKS.md
# "Data-parallel scaling"). Run by hand: dp_scaling_bench --batch=32 --rounds=2
add_executable(dp_scaling_bench ${CMAKE_CURRENT_LIST_DIR}/dp_scaling_bench.cc)
target_link_libraries(dp_scaling_bench PRIVATE gantry_distributed gantry_gan)

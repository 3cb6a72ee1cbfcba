# Benchmarks of the 3DGAN in LibTorch (plain timed mains; figures in docs/BENCHMARKS.md).
# tests/bench/run_gan_bench.sh runs them side by side with tests/bench/pytorch_3dgan.py.
foreach(name gan_generation_bench gan_training_bench)
  add_executable(${name} ${CMAKE_CURRENT_LIST_DIR}/${name}.cc)
  target_link_libraries(${name} PRIVATE gantry_gan)
endforeach()

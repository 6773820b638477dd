# nmkit._cuda (python/src/cuda, docs/design.md 15): CudaSparseLinear from Python. A module of its own
# on the GPU path's part of the library (nmkit_cuda and what it links), so that both this project's
# NMKIT_CUDA builds (python/CMakeLists.txt) and the GPU machine's build (tests/cuda/gpu_check, where
# nmkit's Debian libraries are missing) build it. Needs nanobind found by the caller.
function(nmkit_cuda_python_module source_dir output_dir)
  nanobind_add_module(_cuda NOMINSIZE NB_SUPPRESS_WARNINGS ${source_dir}/python/src/cuda/cuda_linear.cc
                      ${source_dir}/python/src/common.cc)
  target_include_directories(_cuda PRIVATE ${source_dir}/include)
  target_link_libraries(_cuda PRIVATE nmkit_cuda nmkit_core CUDA::cudart)
  set_target_properties(_cuda PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${output_dir})
endfunction()

# cmake/cuda.cmake — the CUDA backend of lik (src/cuda/*.cu).
#
# Included by the top-level CMakeLists.txt when LIK_CUDA is ON (nvcc found).
# - adds src/cuda/*.cu and src/cuda/forward/instantiations/*.cu to the object
#   library lik_objects
# - defines LIK_WITH_CUDA for all of lik_objects (src/api/maxsim.c routes CUDA
#   tensors to lik_cuda_maxsim / lik_cuda_retrieve)
# - builds machine code ahead of time for sm_80 and sm_90a, plus compute_90
#   PTX for newer GPUs (no run-time autotuning, no JIT on A100/H100/H200);
#   the wgmma path (sm_90a) is used only when 90a is in the list
# - links the CUDA runtime statically: lik_link_cuda(<target>)
include_guard(GLOBAL)

enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

if(NOT DEFINED LIK_CUDA_ARCHITECTURES)
  set(LIK_CUDA_ARCHITECTURES "80-real;90a-real;90-virtual")
endif()

# forward/instantiations/: the tensor-core forward's kernels, a few per file
file(GLOB LIK_CUDA_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/cuda/*.cu
     ${PROJECT_SOURCE_DIR}/src/cuda/forward/instantiations/*.cu)
target_sources(lik_objects PRIVATE ${LIK_CUDA_SOURCES})
target_compile_definitions(lik_objects PRIVATE LIK_WITH_CUDA=1)
if(LIK_CUDA_ARCHITECTURES MATCHES "90a")
  # the wgmma kernels exist in the build (src/cuda/wgmma.cuh)
  target_compile_definitions(lik_objects PRIVATE LIK_CUDA_SM90A=1)
endif()
set_target_properties(lik_objects PROPERTIES
  CUDA_ARCHITECTURES "${LIK_CUDA_ARCHITECTURES}"
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON
  CUDA_RUNTIME_LIBRARY Static
  CUDA_VISIBILITY_PRESET hidden)
target_compile_options(lik_objects PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-O3 -lineinfo --expt-relaxed-constexpr -Xcompiler=-fvisibility=hidden>)

function(lik_link_cuda target)
  set_target_properties(${target} PROPERTIES CUDA_RUNTIME_LIBRARY Static)
  target_link_libraries(${target} PRIVATE CUDA::cudart_static)
endfunction()

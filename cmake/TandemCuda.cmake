# Optional CUDA: Hopper SASS (sm_90a) plus compute_90a PTX. Sets TANDEM_HAVE_CUDA.
# The sanitizer builds turn CUDA off: ASan's shadow memory and the CUDA driver do not mix.

set(TANDEM_HAVE_CUDA OFF)
if(TANDEM_SANITIZE AND TANDEM_CUDA STREQUAL "AUTO")
  set(TANDEM_CUDA OFF)
endif()
if(NOT TANDEM_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Architectures are given as explicit -gencode flags below, not through CMake's list.
    set(CMAKE_CUDA_ARCHITECTURES OFF)
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 flag for nvcc
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(TANDEM_CUDA_GENCODE
        "SHELL:-gencode arch=compute_90a,code=sm_90a" "SHELL:-gencode arch=compute_90a,code=compute_90a")
    set(TANDEM_HAVE_CUDA ON)
  elseif(TANDEM_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TANDEM_CUDA=ON but no CUDA compiler (nvcc) was found")
  endif()
endif()

# Adds Hopper code generation and the CUDA runtime to a target that has .cu sources.
function(tandem_cuda_target target)
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:${TANDEM_CUDA_GENCODE}>"
                                           "$<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>")
  set_target_properties(${target} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
  target_link_libraries(${target} PUBLIC CUDA::cudart_static)
endfunction()

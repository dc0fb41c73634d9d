# Warnings, ccache and sanitizers, applied to every C++ target of the project.

find_program(TANDEM_CCACHE ccache)
if(TANDEM_CCACHE)
  set(CMAKE_CXX_COMPILER_LAUNCHER "${TANDEM_CCACHE}")
  set(CMAKE_CUDA_COMPILER_LAUNCHER "${TANDEM_CCACHE}")
endif()

add_compile_options(
  "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wno-unused-parameter;-Wno-missing-field-initializers>")
if(TANDEM_WERROR)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-Werror>")
endif()

if(TANDEM_SANITIZE)
  if(TANDEM_SANITIZE MATCHES "thread" AND TANDEM_SANITIZE MATCHES "address")
    message(FATAL_ERROR "TANDEM_SANITIZE: thread cannot be combined with address")
  endif()
  set(_tandem_san_flags "-fsanitize=${TANDEM_SANITIZE}" -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${_tandem_san_flags}>")
  add_link_options(${_tandem_san_flags})
  # Boost.Asio (the controller's HTTP) uses std::atomic_thread_fence, which GCC warns TSan cannot
  # model (-Wtsan); keep it a warning so -Werror TSan builds of the controller still compile.
  if(TANDEM_SANITIZE MATCHES "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-Wno-error=tsan>")
  endif()
endif()

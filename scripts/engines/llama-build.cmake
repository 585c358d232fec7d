# Injected into the pinned llama.cpp's configure by scripts/setup.sh (CMAKE_PROJECT_INCLUDE), so that the
# engine builds in half the time on a small machine without changing what it computes.
#
# The tensor kernels (ggml, ggml-cpu: every matmul, every op) keep llama.cpp's own -O3. The rest — the HTTP
# server, JSON and chat templates, argument parsing, the model loader and graph builders, the multimodal
# graph builders — runs per request or per token, not per tensor element, and compiles at -O1: 367 s instead
# of 705 s on 2 cores (clang-19, measured 2026-12-03), with the same generation speed on the demo model
# (docs/engine-build.md has the figures). The build directory keys the engine cache (setup.sh hashes this file),
# so a change here rebuilds the engine once.
if(NOT DEFINED LOCH_LLAMA_TUNED)
  set(LOCH_LLAMA_TUNED ON)
  function(loch_tune_llama_targets)
    foreach(target llama llama-common llama-common-base server-context llama-server-impl llama-server mtmd
                   cpp-httplib llama-fit-params)
      if(TARGET ${target})
        target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O1>)
      endif()
    endforeach()
  endfunction()
  # Every target exists once the top-level CMakeLists.txt has been read.
  cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL loch_tune_llama_targets)
endif()

# Injected into the pinned llama.cpp's configure by scripts/setup.sh (CMAKE_PROJECT_INCLUDE), so that the
# engine builds in half the time on a small machine without changing what it computes.
#
# The tensor kernels (ggml, ggml-cpu: every matmul, every op) keep llama.cpp's own -O3. The rest — the HTTP
# server, JSON and chat templates, argument parsing, the model loader and graph builders, the multimodal
# graph builders — runs per request or per token, not per tensor element, and compiles at -O1 in unity
# batches: 705 s → 341 s (-O1) → 246 s (unity) on 2 cores with clang-19, at the same generation speed on the
# demo model (docs/engine-build.md has the figures). This file's hash keys the engine cache (setup.sh), so a
# change here rebuilds the engine once.
if(NOT DEFINED LOCH_LLAMA_TUNED)
  set(LOCH_LLAMA_TUNED ON)
  function(loch_tune_llama_targets)
    foreach(target llama llama-common llama-common-base server-context llama-server-impl llama-server mtmd
                   cpp-httplib llama-fit-params)
      if(TARGET ${target})
        target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O1>)
        # Sixteen sources per compiler run: the same headers (nlohmann/json, the chat templates, the model
        # graph API) are parsed and their templates instantiated once per batch instead of once per file.
        set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 16)
      endif()
    endforeach()
    # common/json.cpp declares its own `json` beside nlohmann's, and mtmd-helper*.cpp refuse (#error) to see
    # mtmd's internal headers: these compile alone.
    if(TARGET llama-common)
      set_source_files_properties(${CMAKE_SOURCE_DIR}/common/json.cpp TARGET_DIRECTORY llama-common
                                  PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    endif()
    if(TARGET mtmd)
      file(GLOB helpers ${CMAKE_SOURCE_DIR}/tools/mtmd/mtmd-helper*.cpp)
      set_source_files_properties(${helpers} TARGET_DIRECTORY mtmd PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    endif()
  endfunction()
  # Every target exists once the top-level CMakeLists.txt has been read.
  cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL loch_tune_llama_targets)
endif()

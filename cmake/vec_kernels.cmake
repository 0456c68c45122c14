# The CPU kernel sets beyond the generic one (kernels/cpu/vec_*.cpp), each compiled with its own
# instruction-set flags where the compiler takes them, added to `target`: the engine's kernels
# library and the fuzzing build's copy of it build them the same way.
#   autoglm_add_vec_kernels(TARGET SOURCE_DIR) -- SOURCE_DIR is the project's src/
include(CheckCXXCompilerFlag)

function(autoglm_add_vec_kernels target src)
  check_cxx_compiler_flag("-mavx2 -mfma -mf16c" AUTOGLM_COMPILER_HAS_AVX2)
  # The same kernels with VNNI dot products (vpdpbusd), for CPUs that have them: AVX-512 VNNI
  # (Ice Lake and later Xeons, Zen 4) and AVX-VNNI (Alder Lake and later cores).
  check_cxx_compiler_flag("-mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavxvnni" AUTOGLM_COMPILER_HAS_VNNI)
  if(NOT AUTOGLM_COMPILER_HAS_AVX2)
    return()
  endif()
  set(avx2 ${src}/kernels/cpu/vec_avx2.cpp)
  target_sources(${target} PRIVATE ${avx2})
  set_source_files_properties(${avx2} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
  target_compile_definitions(${target} PRIVATE AUTOGLM_HAVE_AVX2_KERNELS)
  if(NOT AUTOGLM_COMPILER_HAS_VNNI)
    return()
  endif()
  set(avx512 ${src}/kernels/cpu/vec_avx512vnni.cpp)
  set(avxvnni ${src}/kernels/cpu/vec_avxvnni.cpp)
  target_sources(${target} PRIVATE ${avx512} ${avxvnni})
  set_source_files_properties(${avx512} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS
                              "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512vnni")
  set_source_files_properties(${avxvnni} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS
                              "-mavx2;-mfma;-mf16c;-mavxvnni")
  target_compile_definitions(${target} PRIVATE AUTOGLM_HAVE_VNNI_KERNELS)
endfunction()

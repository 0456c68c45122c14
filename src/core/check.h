// Fail-fast checks for programming errors (not for bad input: that gets a Status).
#pragma once

#include <cstdio>
#include <cstdlib>

#define AUTOGLM_CHECK(cond)                                                         \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

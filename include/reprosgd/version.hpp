// SPDX-License-Identifier: BSD-3-Clause
/// @file Library version and the inline ABI namespace that encodes the numeric options.
#pragma once

#define REPROSGD_VERSION_MAJOR 0
#define REPROSGD_VERSION_MINOR 1
#define REPROSGD_VERSION_PATCH 0
#define REPROSGD_VERSION (REPROSGD_VERSION_MAJOR * 10000 + REPROSGD_VERSION_MINOR * 100 + REPROSGD_VERSION_PATCH)
#define REPROSGD_VERSION_STRING "0.1.0"

// Options that change numerics are part of the inline namespace's name (as nlohmann/json does), so
// translation units built with different numeric options fail to link instead of mixing silently.
#if defined(REPROSGD_STRICT_FP) && REPROSGD_STRICT_FP == 0
#define REPROSGD_IMPL_ABI_TAG v0_relaxedfp
#else
#define REPROSGD_IMPL_ABI_TAG v0_strictfp
#endif

#define REPROSGD_BEGIN_NAMESPACE \
  namespace reprosgd {           \
  inline namespace REPROSGD_IMPL_ABI_TAG {
#define REPROSGD_END_NAMESPACE \
  }                            \
  }

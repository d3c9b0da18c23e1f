// The C ABI's numeric codes (c_api.h) <-> the C++ enums. Explicit tables, not
// casts: the C++ enums may be reordered or grow, the C codes may not change
// without an ABI version bump. Header-only and CUDA-free so the CPU tests
// check it without the kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "dash_attn/c_api.h"
#include "dash_attn/error.hpp"
#include "dash_attn/types.hpp"

namespace dash_attn::capi {

struct ScheduleCode {
  int32_t code;
  ScheduleKind kind;
  const char* name;  // the macro, for error messages
};

inline constexpr ScheduleCode kScheduleCodes[] = {
    {DASH_SCHEDULE_ATOMIC, ScheduleKind::kAtomic, "DASH_SCHEDULE_ATOMIC"},
    {DASH_SCHEDULE_FA3, ScheduleKind::kFA3, "DASH_SCHEDULE_FA3"},
    {DASH_SCHEDULE_DESCENDING, ScheduleKind::kDescending, "DASH_SCHEDULE_DESCENDING"},
    {DASH_SCHEDULE_SHIFT, ScheduleKind::kShift, "DASH_SCHEDULE_SHIFT"},
    {DASH_SCHEDULE_SYMMETRIC_SHIFT, ScheduleKind::kSymmetricShift, "DASH_SCHEDULE_SYMMETRIC_SHIFT"},
    {DASH_SCHEDULE_AUTO, ScheduleKind::kAuto, "DASH_SCHEDULE_AUTO"},
};

struct StatusCode {
  ErrorCode error;
  int32_t code;
};

inline constexpr StatusCode kStatusCodes[] = {
    {ErrorCode::kInvalidArgument, DASH_ERROR_INVALID_ARGUMENT},
    {ErrorCode::kNotSupported, DASH_ERROR_NOT_SUPPORTED},
    {ErrorCode::kNotImplemented, DASH_ERROR_NOT_IMPLEMENTED},
    {ErrorCode::kUnsafeSchedule, DASH_ERROR_UNSAFE_SCHEDULE},
    {ErrorCode::kCudaError, DASH_ERROR_CUDA},
};

// True when the table names each enumerator 0..last exactly once. `last` is
// the enum's final enumerator today, so a table entry dropped or doubled, or an
// enumerator inserted before `last`, stops the build instead of reaching callers.
template <class Entry, std::size_t N, class Enum>
constexpr bool covers_each_once(const Entry (&table)[N], Enum Entry::*field, Enum last) {
  if (N != static_cast<std::size_t>(last) + 1) return false;
  for (std::size_t value = 0; value < N; ++value) {
    int seen = 0;
    for (const Entry& entry : table) seen += static_cast<std::size_t>(entry.*field) == value;
    if (seen != 1) return false;
  }
  return true;
}

// True when no two entries share a C code and none is `reserved` (DASH_OK for statuses).
template <class Entry, std::size_t N>
constexpr bool codes_distinct(const Entry (&table)[N], int32_t reserved) {
  for (std::size_t i = 0; i < N; ++i) {
    if (table[i].code == reserved) return false;
    for (std::size_t j = i + 1; j < N; ++j)
      if (table[i].code == table[j].code) return false;
  }
  return true;
}

static_assert(covers_each_once(kScheduleCodes, &ScheduleCode::kind, ScheduleKind::kAuto) &&
                  codes_distinct(kScheduleCodes, -1),
              "every ScheduleKind needs its own DASH_SCHEDULE_* code (c_api.h, kScheduleCodes, an ABI version bump)");
static_assert(covers_each_once(kStatusCodes, &StatusCode::error, ErrorCode::kCudaError) &&
                  codes_distinct(kStatusCodes, DASH_OK),
              "every ErrorCode needs its own DASH_ERROR_* code (c_api.h, kStatusCodes, an ABI version bump)");

inline ScheduleKind to_schedule(int32_t code) {
  for (const ScheduleCode& entry : kScheduleCodes)
    if (entry.code == code) return entry.kind;
  std::string expected;
  for (const ScheduleCode& entry : kScheduleCodes)
    expected += (expected.empty() ? "" : ", ") + std::string(entry.name) + " = " + std::to_string(entry.code);
  throw Error(ErrorCode::kInvalidArgument, "dash_attn C ABI: argument 'options.schedule': expected one of " +
                                               expected + ", got " + std::to_string(code));
}

inline DType to_dtype(int32_t code) {
  switch (code) {
    case DASH_DTYPE_BF16: return DType::kBF16;
    case DASH_DTYPE_FP16: return DType::kFP16;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "dash_attn C ABI: argument 'dtype': expected DASH_DTYPE_BF16 = " + std::to_string(DASH_DTYPE_BF16) +
                  " or DASH_DTYPE_FP16 = " + std::to_string(DASH_DTYPE_FP16) + ", got " + std::to_string(code));
}

// The return code of a failure; an ErrorCode outside the table (impossible
// while the static_assert holds) reads as a CUDA error, like any non-library exception.
inline int32_t to_status(ErrorCode error) {
  for (const StatusCode& entry : kStatusCodes)
    if (entry.error == error) return entry.code;
  return DASH_ERROR_CUDA;
}

}  // namespace dash_attn::capi

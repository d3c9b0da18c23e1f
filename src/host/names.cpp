#include "dash_attn/types.hpp"

namespace dash_attn {
namespace {

struct ScheduleName {
  ScheduleKind kind;
  std::string_view name;
};

constexpr ScheduleName kScheduleNames[] = {
    {ScheduleKind::kAtomic, "atomic"},   {ScheduleKind::kFA3, "fa3"},
    {ScheduleKind::kDescending, "descending"}, {ScheduleKind::kShift, "shift"},
    {ScheduleKind::kSymmetricShift, "symmetric_shift"}, {ScheduleKind::kAuto, "auto"},
};

}  // namespace

std::string_view to_string(DType dtype) { return dtype == DType::kBF16 ? "bf16" : "fp16"; }

std::string_view to_string(ScheduleKind kind) {
  for (const ScheduleName& entry : kScheduleNames)
    if (entry.kind == kind) return entry.name;
  return "unknown";
}

std::optional<ScheduleKind> parse_schedule_kind(std::string_view name) {
  for (const ScheduleName& entry : kScheduleNames)
    if (entry.name == name) return entry.kind;
  return std::nullopt;
}

}  // namespace dash_attn

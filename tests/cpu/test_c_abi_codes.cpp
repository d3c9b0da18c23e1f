// The C ABI's code tables (src/capi/codes.hpp): every code converts to its own
// C++ enumerator, and an unknown code is refused with the field and value named.
#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <string>

#include "capi/codes.hpp"

namespace dash_attn::capi {
namespace {

std::string upper(std::string_view name) {
  std::string out(name);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

TEST(CAbiCodes, EachScheduleCodeNamesItsKind) {
  for (const ScheduleCode& entry : kScheduleCodes) {
    EXPECT_EQ(to_schedule(entry.code), entry.kind) << entry.name;
    // The macro spells the schedule's public name, so DASH_SCHEDULE_SHIFT cannot mean 'descending'.
    EXPECT_EQ(std::string(entry.name), "DASH_SCHEDULE_" + upper(to_string(entry.kind)));
  }
}

TEST(CAbiCodes, UnknownScheduleCodeIsAnInvalidArgumentNamingFieldAndValue) {
  for (int32_t code : {-1, 6, 99}) {
    try {
      to_schedule(code);
      FAIL() << "schedule code " << code << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      const std::string message = e.what();
      EXPECT_NE(message.find("'options.schedule'"), std::string::npos) << message;
      EXPECT_NE(message.find("got " + std::to_string(code)), std::string::npos) << message;
      EXPECT_NE(message.find("DASH_SCHEDULE_AUTO = 5"), std::string::npos) << message;
    }
  }
}

TEST(CAbiCodes, DtypeCodes) {
  EXPECT_EQ(to_dtype(DASH_DTYPE_BF16), DType::kBF16);
  EXPECT_EQ(to_dtype(DASH_DTYPE_FP16), DType::kFP16);
  try {
    to_dtype(7);
    FAIL() << "dtype code 7 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("'dtype'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("got 7"), std::string::npos) << e.what();
  }
}

TEST(CAbiCodes, EachErrorCodeHasItsOwnNonZeroStatus) {
  EXPECT_EQ(to_status(ErrorCode::kInvalidArgument), DASH_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(to_status(ErrorCode::kNotSupported), DASH_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(to_status(ErrorCode::kNotImplemented), DASH_ERROR_NOT_IMPLEMENTED);
  EXPECT_EQ(to_status(ErrorCode::kUnsafeSchedule), DASH_ERROR_UNSAFE_SCHEDULE);
  EXPECT_EQ(to_status(ErrorCode::kCudaError), DASH_ERROR_CUDA);
  std::set<int32_t> statuses;
  for (const StatusCode& entry : kStatusCodes) statuses.insert(entry.code);
  EXPECT_EQ(statuses.size(), std::size(kStatusCodes));
  EXPECT_EQ(statuses.count(DASH_OK), 0u);
}

}  // namespace
}  // namespace dash_attn::capi

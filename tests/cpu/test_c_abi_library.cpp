// The built C ABI library itself (libdash_attn_capi.so): its version and its
// refusal of an unknown schedule code. Only host code runs (the workspace size
// is planned on the CPU), so it is a CPU test, built wherever the library is.
#include <gtest/gtest.h>

#include <string>

#include "dash_attn/c_api.h"

namespace {

DashShape small_shape() { return DashShape{1, 128, 128, 2, 2, 64}; }

DashOptions options_with(int32_t schedule) {
  DashOptions o{};
  o.deterministic = 1;
  o.schedule = schedule;
  return o;
}

TEST(CAbiLibrary, ReportsTheHeadersAbiVersion) { EXPECT_EQ(dash_abi_version(), DASH_ATTN_ABI_VERSION); }

TEST(CAbiLibrary, KnownScheduleCodePlansAWorkspace) {
  const DashShape shape = small_shape();
  const DashOptions options = options_with(DASH_SCHEDULE_DESCENDING);
  size_t bytes = 0;
  ASSERT_EQ(dash_backward_workspace_size(&shape, &options, &bytes), DASH_OK) << dash_last_error();
  EXPECT_GT(bytes, 0u);
}

TEST(CAbiLibrary, UnknownScheduleCodeIsAnInvalidArgument) {
  const DashShape shape = small_shape();
  const DashOptions options = options_with(42);
  size_t bytes = 0;
  EXPECT_EQ(dash_backward_workspace_size(&shape, &options, &bytes), DASH_ERROR_INVALID_ARGUMENT);
  const std::string message = dash_last_error();
  EXPECT_NE(message.find("'options.schedule'"), std::string::npos) << message;
  EXPECT_NE(message.find("got 42"), std::string::npos) << message;
}

}  // namespace

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

TEST(CAbiLibrary, NullStructPointersAreInvalidArgumentsNamedInTheMessage) {
  const DashShape shape = small_shape();
  const DashOptions options = options_with(DASH_SCHEDULE_AUTO);
  const DashTensor t{reinterpret_cast<void*>(4096), 2 * 128 * 64, 2 * 64, 64, 1};
  const DashLse lse{reinterpret_cast<float*>(4096), 256, 128};
  auto expect_named = [](int status, const char* fragment) {
    EXPECT_EQ(status, DASH_ERROR_INVALID_ARGUMENT);
    const std::string message = dash_last_error();
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
  };
  expect_named(dash_forward(nullptr, DASH_DTYPE_BF16, &t, &t, &t, &t, &lse, nullptr, &options, nullptr), "argument 'shape'");
  expect_named(dash_forward(&shape, DASH_DTYPE_BF16, &t, nullptr, &t, &t, &lse, nullptr, &options, nullptr), "argument 'k'");
  expect_named(dash_forward(&shape, DASH_DTYPE_BF16, &t, &t, &t, &t, nullptr, nullptr, &options, nullptr), "argument 'lse'");
  expect_named(dash_forward(&shape, DASH_DTYPE_BF16, &t, &t, &t, &t, &lse, nullptr, nullptr, nullptr), "argument 'options'");
  expect_named(dash_backward(&shape, DASH_DTYPE_BF16, &t, &t, &t, &t, nullptr, &lse, nullptr, &t, &t, &t, nullptr, 0,
                             nullptr, &options, nullptr),
               "argument 'dout'");
  size_t bytes = 0;
  expect_named(dash_backward_workspace_size(&shape, &options, nullptr), "argument 'bytes'");
  expect_named(dash_backward_workspace_size(&shape, nullptr, &bytes), "argument 'options'");
}

TEST(CAbiLibrary, NegativeSmMarginIsAnInvalidArgument) {
  const DashShape shape = small_shape();
  DashOptions options = options_with(DASH_SCHEDULE_AUTO);
  options.sm_margin = -1;
  size_t bytes = 0;
  EXPECT_EQ(dash_backward_workspace_size(&shape, &options, &bytes), DASH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dash_last_error()).find("options.sm_margin"), std::string::npos) << dash_last_error();
}

}  // namespace

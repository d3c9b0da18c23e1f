// The one error type of the library: a code for programs, a sentence for people.
#pragma once

#include <stdexcept>
#include <string>

namespace dash_attn {

enum class ErrorCode {
  kInvalidArgument,  // the caller passed something the API never accepts
  kNotSupported,     // a valid request this build or device cannot serve
  kNotImplemented,   // planned, not written yet
  kUnsafeSchedule,   // a deterministic schedule that could hang under the given limits
  kCudaError,        // the CUDA runtime reported a failure
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace dash_attn

#include "launch.hpp"

namespace dash_attn::sm90 {

void launch_forward(const ForwardArgs&, float, bool, cudaStream_t) {
  throw Error(ErrorCode::kNotImplemented, "dash_attn::forward: the sm90 forward kernel is not implemented yet");
}

}  // namespace dash_attn::sm90

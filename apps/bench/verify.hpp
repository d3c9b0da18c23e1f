// fp64 verification of dash-bench rows with FlashAttention-3's rule: the
// kernel's max error must be within 2x the error of a naive same-precision
// implementation + 1e-3. What is compared: batch 0, KV head 0 and its group
// of q-heads, either of the timed problem itself (both seqlens up to
// --verify-max-seqlen) or, with --verify, of a reduced problem
// (reduced_shape: same head_dim, GQA group, mask and schedule) on which the
// pass is run once more.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attention_reference.hpp"
#include "bench/cases.hpp"
#include "bench/device_problem.hpp"

namespace dash_attn::bench {

struct Check {
  double max_error = 0;
  bool ok = true;
};

class CaseVerifier {
 public:
  // timed must outlive the verifier. Inactive when the options check no row of this case.
  CaseVerifier(const BenchOptions& options, const BenchCase& c, DeviceProblem& timed);

  bool active() const { return problem_ != nullptr; }
  // "slice" or "reduced B,SQ,SK,HQ,HKV,D"; "-" when inactive.
  const std::string& on() const { return on_; }

  // On the timed problem: call after its forward ran. On the reduced one: runs it.
  Check forward(const Options& options);
  // On the timed problem: call after its backward with these options ran.
  Check backward(const Options& options);

 private:
  void load_inputs();
  std::vector<double> q_heads(const void* device);   // batch 0, q-heads of KV head 0
  std::vector<double> kv_head(const void* device);   // batch 0, KV head 0

  BenchCase case_;
  DType dtype_;
  std::unique_ptr<DeviceProblem> reduced_;
  DeviceProblem* problem_ = nullptr;
  std::string on_ = "-";
  ProblemShape slice_;  // (1, seqlen_q, seqlen_k, group, 1, head_dim)
  double scale_ = 1;
  reference::AttentionOptions reference_;  // the case's mask and mods
  bool forward_ran_ = false;
  std::vector<double> q_, k_, v_, dout_;
  std::optional<reference::ForwardResult> exact_out_, naive_out_;
  std::optional<reference::Gradients> exact_grad_, naive_grad_;
};

}  // namespace dash_attn::bench

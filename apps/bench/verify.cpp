#include "bench/verify.hpp"

#include <cmath>

#include "dash_attn/cuda_check.hpp"
#include "attention_naive.hpp"
#include "dash_attn/dash_attn.hpp"

namespace dash_attn::bench {
namespace {

// The first `count` heads of batch 0 of a (batch, seq, heads, dim) tensor,
// as a dense (1, seq, count, dim) one. Batch 0 is the tensor's prefix.
std::vector<double> first_heads(const std::vector<double>& batch0, int64_t seqlen, int64_t heads, int64_t count,
                                int64_t dim) {
  std::vector<double> out(seqlen * count * dim);
  for (int64_t s = 0; s < seqlen; ++s)
    for (int64_t h = 0; h < count; ++h)
      for (int64_t d = 0; d < dim; ++d) out[(s * count + h) * dim + d] = batch0[(s * heads + h) * dim + d];
  return out;
}

void accumulate(Check& check, const std::vector<double>& kernel, const std::vector<double>& naive,
                const std::vector<double>& exact) {
  double kernel_error = 0, naive_error = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    kernel_error = std::isnan(kernel[i]) ? INFINITY : std::max(kernel_error, std::abs(kernel[i] - exact[i]));
    naive_error = std::max(naive_error, std::abs(naive[i] - exact[i]));
  }
  check.max_error = std::max(check.max_error, kernel_error);
  check.ok = check.ok && kernel_error <= 2 * naive_error + 1e-3;
}

}  // namespace

CaseVerifier::CaseVerifier(const BenchOptions& options, const BenchCase& c, DeviceProblem& timed)
    : case_(c), dtype_(options.dtype) {
  if (slice_checked(options, c.shape)) {
    problem_ = &timed;
    on_ = "slice";
  } else if (options.verify) {
    const ProblemShape shape = reduced_shape(c.shape);
    reduced_ = std::make_unique<DeviceProblem>(shape, options.dtype, case_seed(BenchCase{shape, c.causal, c.mods}));
    problem_ = reduced_.get();
    on_ = "reduced " + shape_text(shape);
  }
  if (!problem_) return;
  const ProblemShape& s = problem_->shape();
  slice_ = ProblemShape{1, s.seqlen_q, s.seqlen_k, s.heads_q / s.heads_kv, 1, s.head_dim};
  scale_ = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  reference_ = reference::AttentionOptions{c.mods.window_left, c.causal ? 0 : c.mods.window_right, c.mods.softcap};
}

std::vector<double> CaseVerifier::q_heads(const void* device) {
  const ProblemShape& s = problem_->shape();
  return first_heads(problem_->download(device, s.seqlen_q * s.heads_q * s.head_dim), s.seqlen_q, s.heads_q,
                     slice_.heads_q, s.head_dim);
}

std::vector<double> CaseVerifier::kv_head(const void* device) {
  const ProblemShape& s = problem_->shape();
  return first_heads(problem_->download(device, s.seqlen_k * s.heads_kv * s.head_dim), s.seqlen_k, s.heads_kv, 1,
                     s.head_dim);
}

void CaseVerifier::load_inputs() {
  if (!q_.empty()) return;
  q_ = q_heads(problem_->q()), k_ = kv_head(problem_->k()), v_ = kv_head(problem_->v());
  dout_ = q_heads(problem_->dout());
}

Check CaseVerifier::forward(const Options& options) {
  if (reduced_ && !forward_ran_) {
    dash_attn::forward(reduced_->forward_args(), options, nullptr);
    DASH_CUDA_CHECK(cudaDeviceSynchronize());
  }
  forward_ran_ = true;
  load_inputs();
  if (!exact_out_) {
    exact_out_ = reference::attention_forward(slice_, reference_, scale_, q_, k_, v_);
    naive_out_ = reference::naive_forward(dtype_, slice_, reference_, scale_, q_, k_, v_);
  }
  Check check;
  accumulate(check, q_heads(problem_->out()), naive_out_->out, exact_out_->out);
  return check;
}

Check CaseVerifier::backward(const Options& options) {
  if (reduced_) {
    if (!forward_ran_) {
      dash_attn::forward(reduced_->forward_args(), options, nullptr);
      forward_ran_ = true;
    }
    dash_attn::backward(reduced_->backward_args(options), options, nullptr);
    DASH_CUDA_CHECK(cudaDeviceSynchronize());
  }
  load_inputs();
  if (!exact_grad_) {  // once per case: the fp64 backward costs seconds
    exact_grad_ = reference::attention_backward(slice_, reference_, scale_, q_, k_, v_, dout_);
    naive_grad_ = reference::naive_backward(dtype_, slice_, reference_, scale_, q_, k_, v_, dout_);
  }
  Check check;
  accumulate(check, q_heads(problem_->dq()), naive_grad_->dq, exact_grad_->dq);
  accumulate(check, kv_head(problem_->dk()), naive_grad_->dk, exact_grad_->dk);
  accumulate(check, kv_head(problem_->dv()), naive_grad_->dv, exact_grad_->dv);
  return check;
}

}  // namespace dash_attn::bench

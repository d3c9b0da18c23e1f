// A naive attention in the kernels' own precision (fp32 arithmetic, every
// matrix product's result and the probabilities rounded to bf16/fp16, as a
// framework's unfused bf16 attention does). Its error against the fp64
// reference is the yardstick of FlashAttention-3's accuracy rule.
#pragma once

#include "attention_reference.hpp"

namespace dash_attn::reference {

// Rounds to the nearest bf16/fp16 value (round to nearest even).
double round_to(DType dtype, double value);

// The options as the fp64 reference reads them (attention_reference.hpp). A
// softcap is unfused: tanh of the rounded scores, rounded; its backward rounds
// dS, then dS * (1 - tanh^2). A sink is one more softmax column holding its fp32
// logit (transformers' eager sinks); dsinks are accumulated and left in fp32.
ForwardResult naive_forward(DType dtype, const ProblemShape& shape, const AttentionOptions& options,
                            double softmax_scale, const std::vector<double>& q, const std::vector<double>& k,
                            const std::vector<double>& v);

Gradients naive_backward(DType dtype, const ProblemShape& shape, const AttentionOptions& options,
                         double softmax_scale, const std::vector<double>& q, const std::vector<double>& k,
                         const std::vector<double>& v, const std::vector<double>& dout);

// No mask or causal, no softcap, no sinks: causal_options(causal).
ForwardResult naive_forward(DType dtype, const ProblemShape& shape, bool causal, double softmax_scale,
                            const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v);

Gradients naive_backward(DType dtype, const ProblemShape& shape, bool causal, double softmax_scale,
                         const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                         const std::vector<double>& dout);

}  // namespace dash_attn::reference

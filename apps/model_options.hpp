// dash-model's command line: the problem, the machine, the cost model, the
// schedules and the output (see `dash-model --help`), or --calibrate FILE.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli_values.hpp"
#include "cost_model.hpp"
#include "dash_attn/types.hpp"
#include "simulate.hpp"

namespace dash_attn::model_cli {

struct ModelOptions {
  int batch = 1, heads = 16, heads_kv = 0, seqlen_q = 4096, seqlen_k = 4096, head_dim = 128;
  int block_m = 0, block_n = 0, workers = 132;  // tiles: 0 = from head_dim
  std::vector<int> seqlens_q, seqlens_k;        // varlen: one length per sequence
  bool causal = false, json = false, optimum = false, help = false;
  model::Assignment assignment = model::Assignment::kDynamic;
  model::CostModel cost;
  int window_left = -1, window_right = -1;  // --window L,R (FlashAttention's window_size; -1 unbounded)
  std::optional<std::pair<int, int>> paper;  // --paper N M
  std::vector<ScheduleKind> schedules;       // default: every schedule for the mask
  std::string svg;
  std::string calibrate;  // --calibrate FILE: the fit instead of a model run
};

// args excludes the program name; each option takes --key value or
// --key=value (CLI11). Throws cli::UsageError naming the option.
ModelOptions parse_model_options(const std::vector<std::string>& args);

// The --help text.
std::string model_usage_text();

}  // namespace dash_attn::model_cli

#include "bench/repro.hpp"

namespace dash_attn::bench {

std::string repro_command(const BenchOptions& options, const BenchCase& c, Pass pass, ScheduleKind schedule) {
  const BenchOptions defaults;
  std::string line = "dash-bench --shape " + shape_text(c.shape) + " --masks " + (c.causal ? "causal" : "full");
  if (pass == Pass::kForward) line += " --passes fwd";
  else line += " --passes bwd --schedules " + std::string(to_string(schedule));
  line += " --dtype " + std::string(to_string(options.dtype));
  line += score_mods_text(c.mods, "--", 17);  // every digit: the line reruns the same softcap
  if (c.q_heads_per_chain > 0) line += " --q-heads-per-chain " + std::to_string(c.q_heads_per_chain);
  if (options.repetitions != defaults.repetitions) line += " --reps " + std::to_string(options.repetitions);
  if (options.settle_ms != defaults.settle_ms) line += " --settle-ms " + std::to_string(options.settle_ms);
  const bool reruns = pass == Pass::kBackward && schedule != ScheduleKind::kAtomic;
  if (reruns && options.determinism_runs != defaults.determinism_runs)
    line += " --determinism-runs " + std::to_string(options.determinism_runs);
  if (options.verify_max_seqlen != defaults.verify_max_seqlen)
    line += " --verify-max-seqlen " + std::to_string(options.verify_max_seqlen);
  if (options.verify) line += " --verify";
  if (options.model) line += " --model";
  return line;
}

}  // namespace dash_attn::bench

// dash-model --calibrate FILE.json: fits the cost model per head dim to a
// dash-bench file and prints, as Markdown, measured vs modeled times, the
// fitted costs, rank agreement per configuration and the model's pick
// against the measured best (docs/schedules.md, Calibration).
#pragma once

#include <string>

// Returns the process exit code: 0, or 2 with a message on stderr when the
// file cannot be read or is malformed.
int run_calibration(const std::string& path);

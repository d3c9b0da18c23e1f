// dash-bench's result files. JSON (read back by dash-model --calibrate and
// bench/*.py): a flat object of the run's fields with a "rows" array of flat
// objects, one row per line. CSV: one line per row, the row's fields and then
// the run's, with the JSON's names. Both are written from the same values, so
// a field reads the same in both: a number or a string where known, null
// (JSON) or an empty field (CSV) where not: no ceiling measured, no GPU read,
// a row that was not timed or not verified.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "bench/report.hpp"

namespace dash_attn::bench {

void write_json(std::ostream& out, const RunInfo& info, const std::vector<Row>& rows);
void write_csv(std::ostream& out, const RunInfo& info, const std::vector<Row>& rows);
// Writes `path` through a temporary file and a rename, so a run stopped
// mid-write leaves the previous complete file. Throws std::runtime_error.
void save_json(const std::string& path, const RunInfo& info, const std::vector<Row>& rows);
void save_csv(const std::string& path, const RunInfo& info, const std::vector<Row>& rows);

// A CSV field: quoted (with "" for a quote) when it holds a comma, quote or line break.
std::string csv_field(const std::string& text);

}  // namespace dash_attn::bench

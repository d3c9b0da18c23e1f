// Command-line values shared by dash-bench and dash-model, and the error both
// throw for a malformed command line; each caller words its own messages.
#pragma once

#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace dash_attn::cli {

// A malformed command line; the message names the option and what it expects.
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The whole of `text` as an integer in [min, 2^30], or nothing.
inline std::optional<int> parse_int(const std::string& text, int min) {
  std::size_t used = 0;
  long value = 0;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (text.empty() || used != text.size() || value < min || value > (1L << 30)) return std::nullopt;
  return static_cast<int>(value);
}

// The value of option `flag` as an integer >= min; UsageError naming the option otherwise.
inline int option_int(const std::string& flag, const std::string& text, int min) {
  const std::optional<int> value = parse_int(text, min);
  if (!value) throw UsageError(flag + " expects an integer >= " + std::to_string(min) + ", got '" + text + "'");
  return *value;
}

// The value of option `flag` as a finite number >= min; UsageError naming the option otherwise.
inline double option_double(const std::string& flag, const std::string& text, double min) {
  std::size_t used = 0;
  double value = 0;
  bool ok = !text.empty();
  try {
    if (ok) value = std::stod(text, &used);
  } catch (const std::exception&) {
    ok = false;
  }
  if (!ok || used != text.size() || !(value >= min) || value > 1e30)
    throw UsageError(flag + " expects a number >= " + std::to_string(min) + ", got '" + text + "'");
  return value;
}

// Comma-separated parts; a trailing comma leaves an empty last part, which
// the caller then rejects like any other malformed value.
inline std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) parts.push_back(part);
  if (!text.empty() && text.back() == ',') parts.emplace_back();
  return parts;
}

}  // namespace dash_attn::cli

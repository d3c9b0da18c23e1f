#include "bench_json.hpp"

#include <algorithm>
#include <istream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <streambuf>

namespace dash_attn::model {
namespace {

using Json = nlohmann::json;

[[noreturn]] void fail(int line, const std::string& what) {
  throw std::invalid_argument("line " + std::to_string(line) + ": " + what);
}

// The text as a stream that tells how much of it the parser has read, so an
// error found after parsing (a bad field) still names the line of its row.
class CountingBuffer : public std::streambuf {
 public:
  explicit CountingBuffer(const std::string& text) {
    char* begin = const_cast<char*>(text.data());  // read only: a streambuf's get area is char*
    setg(begin, begin, begin + text.size());
  }
  std::size_t consumed() const { return static_cast<std::size_t>(gptr() - eback()); }
};

// The line (from 1) of the character before `offset`.
int line_before(const std::string& text, std::size_t offset) {
  const std::size_t end = std::min(offset > 0 ? offset - 1 : 0, text.size());
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
}

// nlohmann's "[json.exception.parse_error.101] parse error at line 4, column 52: syntax error ..."
// as "line 4: syntax error ...".
[[noreturn]] void fail_parse(const std::string& text, const Json::parse_error& e) {
  const std::string what = e.what();
  const std::size_t column = what.find("column ");
  const std::size_t colon = column == std::string::npos ? std::string::npos : what.find(": ", column);
  fail(line_before(text, e.byte), colon == std::string::npos ? what : what.substr(colon + 2));
}

// The rows and the line each starts on.
struct Document {
  Json top;
  std::vector<int> row_lines;
};

Document parse_document(const std::string& text) {
  CountingBuffer buffer(text);
  std::istream in(&buffer);
  Document doc;
  bool in_rows = false;
  // The callback runs as the parser goes: a row's '{' has just been read when
  // its object starts (depth 0 is the file's object, 1 its values, 2 the rows).
  const Json::parser_callback_t note_rows = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1) in_rows = parsed == "rows";
    if (event == Json::parse_event_t::object_start && depth == 2 && in_rows)
      doc.row_lines.push_back(line_before(text, buffer.consumed()));
    return true;
  };
  try {
    doc.top = Json::parse(in, note_rows);
  } catch (const Json::parse_error& e) {
    fail_parse(text, e);
  }
  return doc;
}

const Json& field(const Json& row, const char* key, int line) {
  const auto it = row.find(key);
  if (it == row.end()) fail(line, std::string("row without \"") + key + "\"");
  return *it;
}

std::string string_field(const Json& row, const char* key, int line) {
  const Json& value = field(row, key, line);
  if (!value.is_string()) fail(line, std::string("\"") + key + "\" is not a string");
  return value.get<std::string>();
}

double number_field(const Json& row, const char* key, int line) {
  const Json& value = field(row, key, line);
  if (!value.is_number()) fail(line, std::string("\"") + key + "\" is not a number");
  return value.get<double>();
}

BenchRow backward_row(const Json& row, int line) {
  BenchRow out;
  out.head_dim = static_cast<int>(number_field(row, "head_dim", line));
  const std::string mask = string_field(row, "mask", line);
  if (mask != "full" && mask != "causal") fail(line, "unknown mask '" + mask + "'");
  out.causal = mask == "causal";
  out.seqlen = static_cast<int>(number_field(row, "seqlen", line));
  const std::string name = string_field(row, "schedule", line);
  const auto kind = parse_schedule_kind(name);
  if (!kind) fail(line, "unknown schedule '" + name + "'");
  out.schedule = *kind;
  out.median_ms = number_field(row, "median_ms", line);
  if (out.head_dim <= 0 || out.seqlen <= 0 || !(out.median_ms > 0))
    fail(line, "head_dim, seqlen and median_ms must be positive");
  return out;
}

std::string optional_text(const Json& top, const char* key) {
  const auto it = top.find(key);
  return it != top.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

BenchFile parse_bench_json(const std::string& text) {
  const Document doc = parse_document(text);
  const Json& top = doc.top;
  if (!top.is_object()) fail(1, "expected an object");
  const auto rows = top.find("rows");
  if (rows == top.end() || !rows->is_array()) throw std::invalid_argument("no \"rows\" array");
  BenchFile file;
  for (std::size_t i = 0; i < rows->size(); ++i) {
    const Json& row = (*rows)[i];
    const int line = i < doc.row_lines.size() ? doc.row_lines[i] : 1;
    if (!row.is_object()) fail(line, "a row is not an object");
    if (string_field(row, "pass", line) == "bwd" && string_field(row, "status", line) == "ok")
      file.backward.push_back(backward_row(row, line));
  }
  const auto sms = top.find("sms");
  if (sms == top.end() || !sms->is_number() || sms->get<double>() <= 0)
    throw std::invalid_argument("\"sms\" must be a positive number (the file's SM count)");
  file.sms = sms->get<int>();
  file.device = optional_text(top, "device");
  file.commit = optional_text(top, "commit");
  if (file.backward.empty()) throw std::invalid_argument("no backward rows (\"pass\": \"bwd\", \"status\": \"ok\")");
  return file;
}

}  // namespace dash_attn::model

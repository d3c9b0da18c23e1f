#include "bench_json.hpp"

#include <cctype>
#include <cstdlib>
#include <map>
#include <stdexcept>

namespace dash_attn::model {
namespace {

// A scalar of a flat object: strings keep their text, numbers and literals
// keep their spelling (converted where a field is read).
struct Scalar {
  bool is_string = false;
  std::string text;
  int line = 0;
};
using Object = std::map<std::string, Scalar>;

class Scanner {
 public:
  explicit Scanner(const std::string& text) : text_(text) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("line " + std::to_string(line_) + ": " + what);
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) {
      if (text_[pos_] == '\n') ++line_;
      ++pos_;
    }
  }
  bool peek(char c) {
    skip_space();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("expected '") + c + "'" + (pos_ < text_.size() ? "" : " before the end of the file"));
    ++pos_;
  }
  bool at_end() {
    skip_space();
    return pos_ == text_.size();
  }
  int line() const { return line_; }

  std::string string() {
    expect('"');
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      if (text_[pos_] == '\n') fail("unterminated string");
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;  // dash-bench escapes only quotes and backslashes
      out += text_[pos_++];
    }
    if (pos_ == text_.size()) fail("unterminated string");
    ++pos_;
    return out;
  }

  Scalar scalar() {
    skip_space();
    Scalar s;
    s.line = line_;
    if (peek('"')) {
      s.is_string = true;
      s.text = string();
      return s;
    }
    const std::size_t begin = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '-' ||
                                   text_[pos_] == '+' || text_[pos_] == '.'))
      ++pos_;
    if (pos_ == begin) fail("expected a value");
    s.text = text_.substr(begin, pos_ - begin);
    return s;
  }

  // A flat object; `nested` reads the value of a key whose value is not a scalar.
  template <class Nested>
  Object object(Nested&& nested) {
    Object out;
    expect('{');
    if (peek('}')) return ++pos_, out;
    do {
      const std::string key = string();
      expect(':');
      if (peek('[') || peek('{')) nested(key);
      else out[key] = scalar();
    } while (peek(',') && ++pos_);
    expect('}');
    return out;
  }

 private:
  const std::string& text_;
  std::size_t pos_ = 0;
  int line_ = 1;
};

const Scalar& field(const Object& row, const std::string& key, int line) {
  const auto it = row.find(key);
  if (it == row.end()) throw std::invalid_argument("line " + std::to_string(line) + ": row without \"" + key + "\"");
  return it->second;
}

std::string string_field(const Object& row, const std::string& key, int line) {
  const Scalar& s = field(row, key, line);
  if (!s.is_string) throw std::invalid_argument("line " + std::to_string(s.line) + ": \"" + key + "\" is not a string");
  return s.text;
}

double number_field(const Object& row, const std::string& key, int line) {
  const Scalar& s = field(row, key, line);
  char* end = nullptr;
  const double value = s.is_string ? 0 : std::strtod(s.text.c_str(), &end);
  if (s.is_string || end != s.text.c_str() + s.text.size())
    throw std::invalid_argument("line " + std::to_string(s.line) + ": \"" + key + "\" is not a number");
  return value;
}

BenchRow backward_row(const Object& row, int line) {
  BenchRow out;
  out.head_dim = static_cast<int>(number_field(row, "head_dim", line));
  const std::string mask = string_field(row, "mask", line);
  if (mask != "full" && mask != "causal")
    throw std::invalid_argument("line " + std::to_string(line) + ": unknown mask '" + mask + "'");
  out.causal = mask == "causal";
  out.seqlen = static_cast<int>(number_field(row, "seqlen", line));
  const std::string name = string_field(row, "schedule", line);
  const auto kind = parse_schedule_kind(name);
  if (!kind) throw std::invalid_argument("line " + std::to_string(line) + ": unknown schedule '" + name + "'");
  out.schedule = *kind;
  out.median_ms = number_field(row, "median_ms", line);
  if (out.head_dim <= 0 || out.seqlen <= 0 || !(out.median_ms > 0))
    throw std::invalid_argument("line " + std::to_string(line) + ": head_dim, seqlen and median_ms must be positive");
  return out;
}

}  // namespace

BenchFile parse_bench_json(const std::string& text) {
  Scanner in(text);
  BenchFile file;
  bool has_rows = false;
  const Object top = in.object([&](const std::string& key) {
    if (key != "rows") in.fail("unexpected nested value for \"" + key + "\"");
    has_rows = true;
    in.expect('[');
    if (in.peek(']')) return in.expect(']');
    do {
      in.skip_space();  // a row's errors name the line it starts on
      const int line = in.line();
      const Object row = in.object([&](const std::string& k) { in.fail("unexpected nested value for \"" + k + "\""); });
      if (string_field(row, "pass", line) == "bwd" && string_field(row, "status", line) == "ok")
        file.backward.push_back(backward_row(row, line));
    } while (in.peek(',') && (in.expect(','), true));
    in.expect(']');
  });
  if (!in.at_end()) in.fail("text after the top-level object");
  if (!has_rows) throw std::invalid_argument("no \"rows\" array");
  file.sms = static_cast<int>(number_field(top, "sms", 1));
  if (file.sms <= 0) throw std::invalid_argument("\"sms\" must be positive");
  const auto text_of = [&](const char* key) { return top.count(key) ? top.at(key).text : std::string(); };
  file.device = text_of("device");
  file.commit = text_of("commit");
  if (file.backward.empty()) throw std::invalid_argument("no backward rows (\"pass\": \"bwd\", \"status\": \"ok\")");
  return file;
}

}  // namespace dash_attn::model

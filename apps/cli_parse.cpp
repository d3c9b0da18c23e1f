#include "cli_parse.hpp"

#include <algorithm>
#include <memory>
#include <numeric>
#include <sstream>

namespace dash_attn::cli {
namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// " (did you mean --reps?)" for a near miss (a typo or a prefix), else "".
std::string suggestion(const CLI::App& app, const std::string& flag) {
  std::string best;
  std::size_t best_distance = 3;  // at most two edits away
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& long_name : option->get_lnames()) {
      const std::string name = "--" + long_name;
      const std::size_t distance = name.rfind(flag, 0) == 0 ? 1 : edit_distance(flag, name);
      if (distance < best_distance) best = name, best_distance = distance;
    }
  }
  return best.empty() ? "" : " (did you mean " + best + "?)";
}

// CLI11's "--json: 1 required TEXT missing" as "--json needs a value", and
// "--paper: At least 2 required but received 1" as "--paper needs 2 values".
std::string missing_value_message(const CLI::App& app, const std::string& what) {
  const std::string name = what.substr(0, what.find(':'));
  const CLI::Option* option = app.get_option_no_throw(name);
  if (option == nullptr || (what.find("missing") == std::string::npos && what.find("At least") == std::string::npos))
    return what;
  const int needed = option->get_items_expected_min();
  return name + (needed > 1 ? " needs " + std::to_string(needed) + " values" : " needs a value");
}

// CLI11's help layout with one blank line between groups, each option's
// value spelled as given (option_text) and descriptions wrapped to 100 columns.
class HelpFormatter : public CLI::Formatter {
 public:
  static constexpr std::size_t kNameColumns = 30, kLineColumns = 100;
  HelpFormatter() { column_width(kNameColumns); }

  std::string make_group(std::string group, bool positional, std::vector<const CLI::Option*> options) const override {
    std::string out = group + ":\n";
    for (const CLI::Option* option : options) out += make_option(option, positional);
    return out;
  }
  std::string make_usage(const CLI::App* app, std::string name) const override {
    return CLI::Formatter::make_usage(app, std::move(name)) + "\n";
  }
  std::string make_option_desc(const CLI::Option* option) const override {
    // CLI11 indents the text after each '\n' to the description column.
    std::string out, line;
    std::istringstream words(option->get_description());
    for (std::string word; words >> word;) {
      if (!line.empty() && line.size() + 1 + word.size() > kLineColumns - kNameColumns) out += line + "\n", line.clear();
      line += (line.empty() ? "" : " ") + word;
    }
    return out + line;
  }
};

// CLI11's "Could not convert: --verify = maybe" (a switch given a value it
// cannot read as true or false) in the words of the other errors.
std::string conversion_message(const std::string& what) {
  const std::string prefix = "Could not convert: ";
  const std::size_t equals = what.find(" = ");
  if (what.rfind(prefix, 0) != 0 || equals == std::string::npos) return what;
  return what.substr(prefix.size(), equals - prefix.size()) + " is a switch and takes no value, got '" +
         what.substr(equals + 3) + "'";
}

}  // namespace

void configure(CLI::App& app) {
  app.set_help_flag();
  app.allow_extras();  // parse() words the error for what no option took
  app.formatter(std::make_shared<HelpFormatter>());
}

CLI::Option* add_value(CLI::App& app, const std::string& name, const std::string& value_name,
                       std::function<void(const std::string&)> store, const std::string& help) {
  return app.add_option_function<std::string>(name, std::move(store), help)
      ->option_text(value_name)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

CLI::Option* add_repeated(CLI::App& app, const std::string& name, const std::string& value_name,
                          std::function<void(const std::vector<std::string>&)> store, const std::string& help) {
  return app.add_option_function<std::vector<std::string>>(name, std::move(store), help)
      ->option_text(value_name)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

void parse(CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops its arguments from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ArgumentMismatch& e) {
    throw UsageError(missing_value_message(app, e.what()));
  } catch (const CLI::ConversionError& e) {
    throw UsageError(conversion_message(e.what()));
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  const std::vector<std::string> extra = app.remaining();
  if (extra.empty()) return;
  const std::string& first = extra.front();
  if (first.size() > 1 && first[0] == '-') {
    const std::string flag = first.substr(0, first.find('='));
    throw UsageError("unknown option '" + flag + "'" + suggestion(app, flag));
  }
  throw UsageError("unexpected argument '" + first + "' (every value follows its option)");
}

std::size_t given(const CLI::App& app, const std::string& name) { return app.count(name); }

}  // namespace dash_attn::cli

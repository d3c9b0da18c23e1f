// CLI11 as dash-bench and dash-model use it: every option takes `--key value`
// and `--key=value`; an option given twice keeps its last value; a malformed
// command line throws cli::UsageError worded by option name ("unknown option
// '--x' (did you mean --y?)", "--json needs a value") instead of CLI11's own
// exit. Only the .cpp files that define options include this (CLI11 is heavy).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "cli_values.hpp"

namespace dash_attn::cli {

// Takes CLI11's help flag away (the tools add their own --help and print
// app.help() themselves, so parsing never exits the process) and sets the
// help layout.
void configure(CLI::App& app);

// An option with one value, handed to `store` (which throws UsageError for a
// bad value); the last of repeated occurrences counts.
CLI::Option* add_value(CLI::App& app, const std::string& name, const std::string& value_name,
                       std::function<void(const std::string&)> store, const std::string& help);

// A repeatable option: `store` gets every occurrence's value, in order.
CLI::Option* add_repeated(CLI::App& app, const std::string& name, const std::string& value_name,
                          std::function<void(const std::vector<std::string>&)> store, const std::string& help);

// Parses args (without the program name). Throws UsageError.
void parse(CLI::App& app, const std::vector<std::string>& args);

// How many times the option `name` (e.g. "--grid") was given.
std::size_t given(const CLI::App& app, const std::string& name);

}  // namespace dash_attn::cli

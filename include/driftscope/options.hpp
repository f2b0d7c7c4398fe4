// The row type of every command's option table (issue 25 item 4): an option is declared once, as
// one row of an X-macro table beside the struct it fills (compare_options.hpp for compare,
// check.hpp for check), and every front end is built from those rows: the CLI11 registration,
// the C ABI's options JSON, the nanobind fields and the table as data (_core.compare_options(),
// _core.check_options()), through which the Python argparse, the Python keywords and the docs
// are checked.
//
// A row is X(type, name, default, flag, python keyword, role, lo, hi, choices, group, help):
//   type, name, default  the struct's field (name is also its JSON key and its row name)
//   flag                 the CLI11 spelling ("-j,--threads"); "" when not on the command line
//   python keyword       the Python function's keyword; "" when none
//   role                 value, input_file or output_file (OptionRole)
//   lo, hi               the allowed range of a number (lo == hi == 0: none)
//   choices              the allowed words, comma-separated ("" for any)
//   group                the --help group ("Options" is CLI11's own)
//   help                 the --help text
// and, in a table whose flags are Python's argparse (the guard's), a twelfth column:
//   metavar              the flag's value name in --help ("C" of "--min-cosine C")
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "driftscope/api.h"

namespace driftscope {

// (reference name, candidate name) pairs named exactly (CompareSettings::exact).
using ExactNames = std::vector<std::pair<std::string, std::string>>;

// What an option's value names: a command refuses a report file (`output_file`) that is one of
// its inputs (`input_file`, and the files it is given), and the Ray engine hands input files to
// its workers as absolute paths.
enum class OptionRole : uint8_t { value, input_file, output_file };

// The JSON value types of the rows, from their C++ types.
enum class OptionType : uint8_t {
  number,            // double
  optional_number,   // std::optional<double>: absent or null is "not given"
  integer,           // int64_t
  optional_integer,  // std::optional<int64_t>
  flag,              // bool
  text,              // std::string
  list,              // array of strings; repeatable on the command line
  names,             // object {"reference name": "candidate name"}
};

// settings: the library's options struct (CompareSettings, CheckOptions); command: the
// command's own (report files, display).
enum class OptionScope : uint8_t { settings, command };

// One row, as data: what _core.compare_options() / check_options() return and the docs are
// checked against.
struct OptionSpec {
  std::string_view name;
  OptionType type;
  OptionScope scope;
  OptionRole role;
  std::string_view flag;     // CLI11 spelling ("-j,--threads"); empty: not on the command line
  std::string_view keyword;  // the Python keyword; empty: none
  double lo, hi;             // the allowed range of a number or integer (lo == hi == 0: none)
  std::string_view choices;  // "name,positional"; empty: any text
  std::string_view group;    // the command's --help group
  std::string_view help;
  std::string_view metavar;  // argparse tables only; empty elsewhere
};

DS_API std::string_view option_type_name(OptionType t) noexcept;

template <class T>
constexpr OptionType option_type_of() {
  if constexpr (std::is_same_v<T, double>) return OptionType::number;
  else if constexpr (std::is_same_v<T, std::optional<double>>) return OptionType::optional_number;
  else if constexpr (std::is_same_v<T, int64_t>) return OptionType::integer;
  else if constexpr (std::is_same_v<T, std::optional<int64_t>>) return OptionType::optional_integer;
  else if constexpr (std::is_same_v<T, bool>) return OptionType::flag;
  else if constexpr (std::is_same_v<T, std::string>) return OptionType::text;
  else if constexpr (std::is_same_v<T, std::vector<std::string>>) return OptionType::list;
  else {
    static_assert(std::is_same_v<T, ExactNames>, "an option type the tables do not know");
    return OptionType::names;
  }
}

// A struct's field from a row.
#define DRIFTSCOPE_OPTION_FIELD_(type, name, def, ...) type name = def;
// A row as an OptionSpec of the given scope (settings or command). The optional twelfth column
// (a literal) is the metavar: `"" metavar` is that literal, or "" when a table has no such column.
#define DRIFTSCOPE_OPTION_SPEC_(scope, type, name, def, flag, keyword, role, lo, hi, choices, group, help, ...) \
  ::driftscope::OptionSpec{#name, ::driftscope::option_type_of<type>(), ::driftscope::OptionScope::scope, \
                           ::driftscope::OptionRole::role, flag, keyword, lo, hi, choices, group, help,  \
                           "" __VA_ARGS__},
#define DRIFTSCOPE_OPTION_SETTINGS_SPEC_(...) DRIFTSCOPE_OPTION_SPEC_(settings, __VA_ARGS__)
#define DRIFTSCOPE_OPTION_COMMAND_SPEC_(...) DRIFTSCOPE_OPTION_SPEC_(command, __VA_ARGS__)

}  // namespace driftscope

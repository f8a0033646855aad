// SPDX-License-Identifier: BSD-3-Clause
/// @file A reader for delimited text (CSV) files of numeric features and an integer label column,
/// or (regression) numeric features followed by numeric targets.
#pragma once

#include <reprosgd/data/dataset.hpp>
#include <reprosgd/error.hpp>

#include <Kokkos_Core.hpp>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <sys/stat.h>

REPROSGD_BEGIN_NAMESPACE

/// Whether the first non-blank line of a CSV file holds column names.
enum class CsvHeader {
  absent,   ///< every line is data
  present,  ///< the first non-blank line is skipped
  detect,   ///< a header if any field of the first non-blank line is not a number
};

/// Options of read_csv_dataset() and parse_csv_dataset() (designated initializers welcome:
/// `{.label_column = 0, .header = CsvHeader::present}`).
struct CsvOptions {
  /// 0-based column of the label; -1 is the last column.
  int label_column = -1;
  CsvHeader header = CsvHeader::detect;
  char delimiter = ',';
  /// Number of classes C; labels must lie in [0, C). 0: C = (largest label) + 1.
  int num_classes = 0;
  /// Accept "nan", "inf", "infinity" (any case, signed) as feature values. Off by default: such a
  /// field is an error naming its line and column. When on, validate_finite() finds them later.
  bool allow_non_finite = false;
  /// Regression: the last `targets` columns of each line are float targets (parsed like the
  /// features) and there is no label column (label_column and num_classes must keep their
  /// defaults). 0: classification, one integer label column.
  int targets = 0;
};

namespace detail {

struct CsvCursor {
  std::string_view source;
  std::size_t line = 0;
};

[[noreturn]] inline void csv_fail(const CsvCursor& at, const std::string& what) {
  throw data_error("reprosgd::read_csv_dataset: " + std::string(at.source) + ", line " + std::to_string(at.line) +
                   ": " + what);
}
[[noreturn]] inline void csv_fail(const CsvCursor& at, std::size_t column, const std::string& what) {
  throw data_error("reprosgd::read_csv_dataset: " + std::string(at.source) + ", line " + std::to_string(at.line) +
                   ", column " + std::to_string(column) + ": " + what);
}

inline std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

inline void split_fields(std::string_view line, char delimiter, std::vector<std::string_view>& fields) {
  fields.clear();
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = line.find(delimiter, start);
    if (end == std::string_view::npos) {
      fields.push_back(trim(line.substr(start)));
      return;
    }
    fields.push_back(trim(line.substr(start, end - start)));
    start = end + 1;
  }
}

enum class FloatParse { ok, not_a_number, out_of_range };

// std::from_chars: locale independent and correctly rounded, so "0.1" gives the same float bits
// on every machine, and printing with to_chars round-trips exactly. A leading '+' is accepted too.
inline FloatParse parse_float(std::string_view s, float& out) noexcept {
  if (!s.empty() && s.front() == '+') {
    s.remove_prefix(1);
    if (!s.empty() && (s.front() == '-' || s.front() == '+')) return FloatParse::not_a_number;
  }
  if (s.empty()) return FloatParse::not_a_number;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out, std::chars_format::general);
  if (ec == std::errc::result_out_of_range) return FloatParse::out_of_range;
  if (ec != std::errc() || ptr != s.data() + s.size()) return FloatParse::not_a_number;
  return FloatParse::ok;
}

inline bool parse_label(std::string_view s, std::int64_t& out) noexcept {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 10);
  return ec == std::errc() && ptr == s.data() + s.size();
}

inline std::string quote(std::string_view s) {
  // Appended piece by piece: `"'" + std::string(...)` trips GCC 12's false -Wrestrict (PR 105329).
  constexpr std::size_t max_shown = 40;
  std::string out(1, '\'');
  out.append(s.substr(0, max_shown));
  out.append(s.size() > max_shown ? "...'" : "'");
  return out;
}

}  // namespace detail

/**
 * Parses CSV text held in memory into a host Dataset (see read_csv_dataset() for the format).
 *
 * @param text the file's contents.
 * @param options label column, header, delimiter, number of classes.
 * @param source the name used in error messages (e.g. the path).
 */
[[nodiscard]] inline Dataset<Kokkos::HostSpace> parse_csv_dataset(std::string_view text, const CsvOptions& options = {},
                                                                  std::string_view source = "<memory>") {
  if (options.num_classes < 0)
    throw config_error("reprosgd::read_csv_dataset: num_classes must be 0 (infer) or positive, got " +
                       std::to_string(options.num_classes));
  if (options.label_column < -1)
    throw config_error("reprosgd::read_csv_dataset: label_column must be -1 (last) or a column index, got " +
                       std::to_string(options.label_column));
  if (options.delimiter == '\n' || options.delimiter == '\r' || options.delimiter == '\0')
    throw config_error("reprosgd::read_csv_dataset: the delimiter cannot be a line break or NUL");
  if (options.targets < 0)
    throw config_error("reprosgd::read_csv_dataset: targets must be 0 (a label column) or positive, got " +
                       std::to_string(options.targets));
  if (options.targets > 0 && (options.label_column != -1 || options.num_classes != 0))
    throw config_error("reprosgd::read_csv_dataset: targets " + std::to_string(options.targets) +
                       " (regression) has no label column: leave label_column and num_classes at their defaults");
  const std::size_t n_targets = static_cast<std::size_t>(options.targets);

  detail::CsvCursor at{source, 0};
  std::vector<std::string_view> fields;
  std::vector<float> values;
  std::vector<std::int32_t> labels;
  std::vector<float> targets;
  std::size_t rows = 0;
  std::size_t columns = 0;  // fields per line, fixed by the first line
  std::size_t label_col = 0;
  std::int64_t max_label = -1;
  bool first = true;
  bool header_pending = options.header != CsvHeader::absent;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++at.line;
    if (detail::trim(line).empty()) continue;  // blank lines (and a final newline) carry no data
    detail::split_fields(line, options.delimiter, fields);
    if (header_pending) {
      header_pending = false;
      bool is_header = options.header == CsvHeader::present;
      if (options.header == CsvHeader::detect) {
        for (auto f : fields) {
          float v = 0;
          if (detail::parse_float(f, v) == detail::FloatParse::not_a_number) is_header = true;
        }
      }
      if (is_header) {
        columns = fields.size();
        first = false;
        if (options.label_column >= 0 && static_cast<std::size_t>(options.label_column) >= columns)
          throw config_error("reprosgd::read_csv_dataset: " + std::string(source) + ": label_column " +
                             std::to_string(options.label_column) + " but line " + std::to_string(at.line) +
                             " has " + std::to_string(columns) + " fields");
        label_col = options.label_column < 0 ? columns - 1 : static_cast<std::size_t>(options.label_column);
        continue;
      }
    }
    if (first) {
      first = false;
      columns = fields.size();
      if (options.label_column >= 0 && static_cast<std::size_t>(options.label_column) >= columns)
        throw config_error("reprosgd::read_csv_dataset: " + std::string(source) + ": label_column " +
                           std::to_string(options.label_column) + " but line " + std::to_string(at.line) +
                           " has " + std::to_string(columns) + " fields");
      label_col = options.label_column < 0 ? columns - 1 : static_cast<std::size_t>(options.label_column);
    }
    if (n_targets > 0 && columns < n_targets + 1)
      detail::csv_fail(at, "expected at least one feature and " + std::to_string(n_targets) + " target(s), found " +
                               std::to_string(columns) + " field(s)");
    if (columns < 2) detail::csv_fail(at, "expected a label and at least one feature, found 1 field");
    if (fields.size() != columns)
      detail::csv_fail(at, "expected " + std::to_string(columns) + " fields, found " + std::to_string(fields.size()));
    ++rows;
    for (std::size_t c = 0; c < columns; ++c) {
      const std::string_view f = fields[c];
      if (n_targets == 0 && c == label_col) {
        std::int64_t y = 0;
        if (!detail::parse_label(f, y)) detail::csv_fail(at, c + 1, "label " + detail::quote(f) + " is not an integer");
        if (y < 0 || (options.num_classes > 0 && y >= options.num_classes) ||
            y > std::numeric_limits<std::int32_t>::max() - 1)
          detail::csv_fail(at, c + 1,
                           "label " + std::to_string(y) + " is outside [0, " +
                               (options.num_classes > 0 ? std::to_string(options.num_classes) : std::string("2147483647")) +
                               ")");
        if (y > max_label) max_label = y;
        labels.push_back(static_cast<std::int32_t>(y));
        continue;
      }
      float v = 0;
      switch (detail::parse_float(f, v)) {
        case detail::FloatParse::ok: break;
        case detail::FloatParse::not_a_number:
          detail::csv_fail(at, c + 1, f.empty() ? std::string("empty field") : "not a number: " + detail::quote(f));
        case detail::FloatParse::out_of_range:
          detail::csv_fail(at, c + 1, "value " + detail::quote(f) + " is out of the range of float");
      }
      if (!options.allow_non_finite && detail::is_non_finite(v))
        detail::csv_fail(at, c + 1, "non-finite value " + detail::quote(f) + " (set allow_non_finite to accept it)");
      (c + n_targets >= columns && n_targets > 0 ? targets : values).push_back(v);
    }
  }
  if (rows == 0) {
    if (at.line == 0 || first) throw data_error("reprosgd::read_csv_dataset: " + std::string(source) + ": empty file");
    throw data_error("reprosgd::read_csv_dataset: " + std::string(source) + ": no data rows");
  }

  const std::size_t n = rows;
  const std::size_t f = columns - (n_targets > 0 ? n_targets : 1);
  Dataset<Kokkos::HostSpace> out;
  if (n_targets > 0) {
    out.features = Dataset<Kokkos::HostSpace>::features_type(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("reprosgd::csv_features")), n, f);
    out.targets = Dataset<Kokkos::HostSpace>::targets_type(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("reprosgd::csv_targets")), n, n_targets);
    std::memcpy(out.features.data(), values.data(), values.size() * sizeof(float));
    std::memcpy(out.targets.data(), targets.data(), targets.size() * sizeof(float));
    return out;
  }
  out.num_classes = options.num_classes > 0 ? options.num_classes : static_cast<int>(max_label + 1);
  out.features = Dataset<Kokkos::HostSpace>::features_type(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("reprosgd::csv_features")), n, f);
  out.labels = Dataset<Kokkos::HostSpace>::labels_type(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("reprosgd::csv_labels")), n);
  std::memcpy(out.features.data(), values.data(), values.size() * sizeof(float));
  std::memcpy(out.labels.data(), labels.data(), labels.size() * sizeof(std::int32_t));
  return out;
}

/**
 * Reads a CSV file of numeric features and one integer label column (or, with options.targets =
 * T, features followed by T numeric regression targets) into a host Dataset.
 *
 * Format: one sample per line ('\n' or "\r\n"); fields separated by `options.delimiter`, with
 * spaces and tabs around a field ignored; no quoting. Blank lines are skipped. Every line has the
 * same number of fields as the first. Features are parsed with std::from_chars (locale
 * independent, correctly rounded; a leading '+' accepted); the label is a decimal integer.
 *
 * @throws io_error when the file cannot be opened or read, or is a directory.
 * @throws data_error "reprosgd::read_csv_dataset: <path>, line 3, column 2: not a number: 'abc'";
 *         also "empty field", "value '1e999' is out of the range of float", "non-finite value
 *         'nan' (set allow_non_finite to accept it)", "label '2.5' is not an integer", "label 12 is
 *         outside [0, 10)", "<path>, line 4: expected 5 fields, found 4", "<path>: empty file",
 *         "<path>: no data rows" (a header only).
 * @throws config_error for bad options, or a label_column beyond the fields of the first line.
 */
[[nodiscard]] inline Dataset<Kokkos::HostSpace> read_csv_dataset(const std::string& path, const CsvOptions& options = {}) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw io_error("reprosgd::read_csv_dataset: cannot open " + path + ": " + std::strerror(EISDIR));
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int e = errno;
    throw io_error("reprosgd::read_csv_dataset: cannot open " + path + ": " + std::strerror(e));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw io_error("reprosgd::read_csv_dataset: cannot read " + path);
  const std::string text = std::move(buffer).str();
  return parse_csv_dataset(text, options, path);
}

REPROSGD_END_NAMESPACE

// Table: a plain-text table with aligned columns, for output meant to be read by people.
#ifndef GANTRY_CLIENTS_CLI_TABLE_H_
#define GANTRY_CLIENTS_CLI_TABLE_H_

#include <ostream>
#include <string>
#include <vector>

namespace gantry::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}

  // Adds a row; missing cells are blank, extra cells are dropped. Empty cells print as "-". Cells
  // are shown through EscapeControlText (base/safe_text.h): one line each, no control characters.
  void AddRow(std::vector<std::string> cells);
  size_t rows() const { return rows_.size(); }

  // Writes the header and rows, columns separated by at least two spaces, each padded to its widest
  // cell (counted in UTF-8 code points); the last column is not padded and no line has trailing
  // spaces.
  void Render(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// Display width of a UTF-8 string in code points (every code point counts as one column).
size_t DisplayWidth(const std::string& text);

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_TABLE_H_

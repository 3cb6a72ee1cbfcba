#include "clients/cli/table.h"

#include <algorithm>

#include "base/safe_text.h"

namespace gantry::cli {

size_t DisplayWidth(const std::string& text) {
  size_t width = 0;
  for (unsigned char c : text) {
    if ((c & 0xC0) != 0x80) ++width;  // count bytes that start a code point
  }
  return width;
}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  for (auto& cell : cells) {
    cell = cell.empty() ? "-" : EscapeControlText(cell);
  }
  rows_.push_back(std::move(cells));
}

void Table::Render(std::ostream& out) const {
  std::vector<size_t> widths(headers_.size(), 0);
  for (size_t c = 0; c < headers_.size(); ++c) widths[c] = DisplayWidth(headers_[c]);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], DisplayWidth(row[c]));
  }
  auto write_line = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < cells.size(); ++c) {
      line += cells[c];
      if (c + 1 < cells.size()) line.append(widths[c] - DisplayWidth(cells[c]) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << '\n';
  };
  write_line(headers_);
  for (const auto& row : rows_) write_line(row);
}

}  // namespace gantry::cli

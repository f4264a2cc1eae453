#pragma once
/// Typed tables for reports: declared once, rendered as a Markdown pipe table (the PR-comment
/// summaries) or an HTML table.
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attest::report {

/// One cell. `text` cells are Markdown as written (they may carry inline Markdown) and escaped
/// text in HTML; `code` and `strong` are wrapped by the renderer; `absent` marks a cell with no
/// value, which Markdown renders as the table's placeholder and HTML as an empty cell.
struct Cell {
  enum class Kind { text, code, strong, absent };
  std::string text;
  Kind kind = Kind::text;
  std::optional<std::string> html_class;  ///< `class="..."` on the HTML cell when set, even to ""

  Cell() : kind(Kind::absent) {}
  // Implicit, so that a row reads as a list of strings: {"a", Cell::code("k"), fmt::format(...)}.
  Cell(std::string s) : text(std::move(s)) {}
  Cell(const char* s) : text(s) {}
  static Cell code(std::string s) { return Cell(std::move(s), Kind::code); }
  static Cell strong(std::string s) { return Cell(std::move(s), Kind::strong); }
  static Cell absent() { return Cell(); }
  /// The same cell with an HTML class.
  Cell with_class(std::string c) && {
    html_class = std::move(c);
    return std::move(*this);
  }

 private:
  Cell(std::string s, Kind k) : text(std::move(s)), kind(k) {}
};

enum class Align { left, right };

struct Column {
  Cell header;
  Align align = Align::left;
};

class Table {
 public:
  /// `placeholder`: what Markdown shows for an absent cell ("" leaves the cell blank).
  explicit Table(std::vector<Column> columns, std::string placeholder = "")
      : columns_(std::move(columns)), placeholder_(std::move(placeholder)) {}

  /// Appends a row: its cells in column order, as many as it has (a shorter row is not padded).
  Table& add(std::vector<Cell> row) {
    rows_.push_back(std::move(row));
    return *this;
  }
  [[nodiscard]] bool empty() const { return rows_.empty(); }

  /// GitHub-flavoured Markdown: `| a | b |`, then `|---|---:|` (right-aligned columns end in
  /// ':'), then one line per row; an absent cell is `| |` (or `| placeholder |`); every line ends
  /// in a newline.
  [[nodiscard]] std::string markdown() const;
  /// `<table><tr><th>a</th>...</tr>` and a `<tr><td>...</td></tr>` line per row, then `</table>`
  /// and a newline. Alignment is left to the page's stylesheet.
  [[nodiscard]] std::string html() const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<Cell>> rows_;
  std::string placeholder_;
};

}  // namespace attest::report

#include "attest/core/report/table.hpp"

#include "attest/core/report/escape.hpp"

namespace attest::report {
namespace {

std::string markdown_cell(const Cell& c, const std::string& placeholder) {
  switch (c.kind) {
    case Cell::Kind::text:
      return " " + c.text + " |";
    case Cell::Kind::code:
      return " `" + c.text + "` |";
    case Cell::Kind::strong:
      return " **" + c.text + "** |";
    case Cell::Kind::absent:
      break;
  }
  return placeholder.empty() ? " |" : " " + placeholder + " |";
}

std::string html_cell(const char* tag, const Cell& c) {
  std::string o = std::string("<") + tag;
  if (c.html_class) o += " class=\"" + escape_html(*c.html_class) + "\"";
  o += ">";
  switch (c.kind) {
    case Cell::Kind::text:
      o += escape_html(c.text);
      break;
    case Cell::Kind::code:
      o += "<code>" + escape_html(c.text) + "</code>";
      break;
    case Cell::Kind::strong:
      o += "<strong>" + escape_html(c.text) + "</strong>";
      break;
    case Cell::Kind::absent:
      break;
  }
  return o + "</" + tag + ">";
}

}  // namespace

std::string Table::markdown() const {
  std::string s = "|";
  for (const auto& c : columns_) s += markdown_cell(c.header, placeholder_);
  s += "\n|";
  for (const auto& c : columns_) s += c.align == Align::right ? "---:|" : "---|";
  s += "\n";
  for (const auto& row : rows_) {
    s += "|";
    for (const auto& c : row) s += markdown_cell(c, placeholder_);
    s += "\n";
  }
  return s;
}

std::string Table::html() const {
  std::string s = "<table><tr>";
  for (const auto& c : columns_) s += html_cell("th", c.header);
  s += "</tr>\n";
  for (const auto& row : rows_) {
    s += "<tr>";
    for (const auto& c : row) s += html_cell("td", c);
    s += "</tr>\n";
  }
  return s + "</table>\n";
}

}  // namespace attest::report

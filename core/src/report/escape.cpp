#include "attest/core/report/escape.hpp"

namespace attest::report {
namespace {

// The references both HTML and XML need; nullptr for a byte that stays as it is.
const char* markup_entity(char c) {
  switch (c) {
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '"': return "&quot;";
    default: return nullptr;
  }
}

}  // namespace

std::string escape_html(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    if (const char* e = markup_entity(c)) o += e;
    else o += c;
  }
  return o;
}

std::string escape_xml(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    if (const char* e = markup_entity(c)) o += e;
    else if (c == '\'') o += "&apos;";
    else if (c == '\n') o += "&#10;";
    else if (static_cast<unsigned char>(c) >= 0x20 || c == '\t') o += c;
  }
  return o;
}

}  // namespace attest::report

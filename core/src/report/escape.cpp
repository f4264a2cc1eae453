#include "attest/core/report/escape.hpp"

namespace attest::report {
namespace {

// The references both HTML and XML need; nullptr for a byte that stays as it is.
const char* markup_entity(char c) {
  switch (c) {
    case '&':
      return "&amp;";
    case '<':
      return "&lt;";
    case '>':
      return "&gt;";
    case '"':
      return "&quot;";
    default:
      return nullptr;
  }
}

// XML adds &apos;, keeps a newline through attribute-value normalisation as &#10;, and drops the
// C0 controls other than tab ("" : the byte is removed).
const char* xml_entity(char c) {
  if (const char* e = markup_entity(c)) return e;
  if (c == '\'') return "&apos;";
  if (c == '\n') return "&#10;";
  if (static_cast<unsigned char>(c) < 0x20 && c != '\t') return "";
  return nullptr;
}

// `s` with every byte replaced by entity(byte), or kept where that is nullptr.
template <class Entity>
std::string replace_bytes(std::string_view s, Entity entity) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    if (const char* e = entity(c))
      o += e;
    else
      o += c;
  }
  return o;
}

}  // namespace

std::string escape_html(std::string_view s) { return replace_bytes(s, markup_entity); }

std::string escape_xml(std::string_view s) { return replace_bytes(s, xml_entity); }

}  // namespace attest::report

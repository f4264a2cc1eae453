#pragma once
/// Escaping for the HTML pages, SVG plots and JUnit XML that reports write.
// Hand-written: fmt and the Debian-packaged libraries offer no HTML/XML escaping; it is one table.
#include <string>
#include <string_view>

namespace attest::report {

/// HTML text and double-quoted attribute values (also SVG): & < > " become &amp; &lt; &gt; &quot;
/// (the named character references of the HTML standard); every other byte, UTF-8 included, is kept.
std::string escape_html(std::string_view s);

/// XML 1.0 text and attribute values (JUnit): & < > " ' become &amp; &lt; &gt; &quot; &apos;, a
/// newline becomes &#10; (kept through attribute-value normalisation), a tab is kept, and the other
/// C0 control characters are dropped (XML 1.0 allows them in no form, not even as references).
std::string escape_xml(std::string_view s);

}  // namespace attest::report

// A minimal builder for the self-contained HTML reports: one file, inline
// CSS, inline SVG charts, no scripts, nothing fetched from the network.
// Thread-safety: a value type.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvs::bench {

class HtmlPage {
 public:
  explicit HtmlPage(std::string title);

  void H2(std::string_view text);
  void P(std::string_view text);        // escaped
  void Raw(std::string_view html);      // trusted markup (our SVG)
  // A table; cells are escaped. status_col >= 0 colours that column's
  // PASS/FAIL/SKIP cells.
  void Table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
             int status_col = -1);
  // <pre> block (escaped).
  void Pre(std::string_view text);
  std::string Finish() const;

 private:
  std::string title_;
  std::string body_;
};

// HTML escaping of text (&, <, >, ").
std::string HtmlEscape(std::string_view s);

}  // namespace kvs::bench

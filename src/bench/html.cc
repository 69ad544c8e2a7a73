#include "bench/html.h"

#include "bench/svg.h"

namespace kvs::bench {

std::string HtmlEscape(std::string_view s) { return svg::Escape(s); }

HtmlPage::HtmlPage(std::string title) : title_(std::move(title)) {}

void HtmlPage::H2(std::string_view text) { body_ += "<h2>" + HtmlEscape(text) + "</h2>\n"; }

void HtmlPage::P(std::string_view text) { body_ += "<p>" + HtmlEscape(text) + "</p>\n"; }

void HtmlPage::Raw(std::string_view html) { body_ += std::string(html); }

void HtmlPage::Pre(std::string_view text) { body_ += "<pre>" + HtmlEscape(text) + "</pre>\n"; }

namespace {

// Numbers ("12", "-3.5", "45 ms", "12%", "3/10") are right-aligned; words
// and sentences (even those starting with a digit) left.
bool Numeric(const std::string& s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  return ((i < s.size() && s[i] >= '0' && s[i] <= '9') && s.size() <= 12) || s == "-";
}

}  // namespace

void HtmlPage::Table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                     int status_col) {
  body_ += "<table>\n<tr>";
  for (const std::string& h : header) body_ += "<th>" + HtmlEscape(h) + "</th>";
  body_ += "</tr>\n";
  for (const auto& row : rows) {
    body_ += "<tr>";
    for (size_t i = 0; i < row.size(); ++i) {
      std::string cls = Numeric(row[i]) ? "" : " class=\"text\"";
      if (static_cast<int>(i) == status_col) {
        if (row[i] == "PASS") cls = " class=\"pass\"";
        if (row[i] == "FAIL") cls = " class=\"fail\"";
        if (row[i] == "SKIP") cls = " class=\"skip\"";
      }
      body_ += "<td" + cls + ">" + HtmlEscape(row[i]) + "</td>";
    }
    body_ += "</tr>\n";
  }
  body_ += "</table>\n";
}

std::string HtmlPage::Finish() const {
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  o += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  o += "<title>" + HtmlEscape(title_) + "</title>\n";
  o += R"(<style>
body { font-family: sans-serif; margin: 24px auto; max-width: 1100px; color: #222; background: #fff; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
th { background: #f3f3f3; } td.text, td:first-child, th:first-child { text-align: left; }
td.pass { background: #d9f2d9; font-weight: bold; } td.fail { background: #f8d0d0; font-weight: bold; }
td.skip { background: #eeeeee; color: #555; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; } .charts svg { border: 1px solid #eee; }
pre { background: #f7f7f7; padding: 8px; font-size: 12px; overflow-x: auto; }
.meta { color: #555; font-size: 13px; }
</style>
</head>
<body>
)";
  o += "<h1>" + HtmlEscape(title_) + "</h1>\n";
  o += body_;
  o += "</body>\n</html>\n";
  return o;
}

}  // namespace kvs::bench

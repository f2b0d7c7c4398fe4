// The report pages (compare, guard, check) share one way of being filled: escaped title, the
// shared stylesheet (report.css) and script (report_common.js), and JSON blocks that the page's
// script reads and inserts as text. The <head> (charset, the Content-Security-Policy that forbids
// every network request, title, style) is written here once for every page: %%DS_HEAD%%.
#include <string>

#include "report/render.hpp"
#include "driftscope/text.hpp"

namespace driftscope::report_detail {
namespace {

constexpr std::string_view kStyle =
#include "report_css.inc"
    ;
constexpr std::string_view kCommonJs =
#include "report_common_js.inc"
    ;

// default-src 'none' blocks fetch/XHR/WebSocket, images from anywhere but data: URLs, fonts and
// frames; inline script and style are the page itself. base-uri and form-action are not covered
// by default-src, so they are closed separately.
constexpr std::string_view kHeadBeforeTitle =
    "<meta charset=\"utf-8\">\n"
    "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src "
    "'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'\">\n"
    "<meta name=\"referrer\" content=\"no-referrer\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<title>";
constexpr std::string_view kHeadAfterTitle = "</title>\n<style>\n";
constexpr std::string_view kHeadEnd = "\n</style>";

// JSON inside <script type="application/json">: the block ends at the first "</script" and
// "<!--" changes how it is parsed, so '<' (and '>', '&' for good measure) are written as \u00XX
// escapes, which JSON.parse reads back as the same characters. They only occur inside strings.
void append_script_json(std::string& out, std::string_view j) {
  for (char c : j) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out += c;
    }
  }
}

// Text in HTML markup (the <title>): printable(), then the five characters HTML gives a meaning.
void append_html_text(std::string& out, std::string_view s) {
  for (char c : printable(s)) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
}

}  // namespace

std::string fill_html_page(std::string_view t, std::string_view title, std::initializer_list<HtmlSlot> slots) {
  size_t extra = kHeadBeforeTitle.size() + kStyle.size() + kCommonJs.size() + title.size() * 2;
  for (const HtmlSlot& s : slots) extra += s.json.size() + s.json.size() / 8;
  std::string out;
  out.reserve(t.size() + extra);
  static constexpr std::string_view kOpen = "%%DS_", kClose = "%%";
  for (;;) {
    size_t at = t.find(kOpen);
    size_t end = at == std::string_view::npos ? at : t.find(kClose, at + kOpen.size());
    if (end == std::string_view::npos) break;  // the templates are ours; tests check every marker
    out += t.substr(0, at);
    std::string_view name = t.substr(at + kOpen.size(), end - at - kOpen.size());
    if (name == "HEAD") {
      out += kHeadBeforeTitle;
      append_html_text(out, title);
      out += kHeadAfterTitle;
      out += kStyle;
      out += kHeadEnd;
    } else if (name == "COMMON_JS") {
      out += kCommonJs;
    } else {
      for (const HtmlSlot& s : slots)
        if (s.name == name) append_script_json(out, s.json);
    }
    t.remove_prefix(end + kClose.size());
  }
  out += t;
  return out;
}

}  // namespace driftscope::report_detail

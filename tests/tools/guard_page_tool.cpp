// The guard page (guard_report_to_html) of a guard JSON report file, on stdout, for
// scripts/report-bytes.sh: the guard itself is Python, so without this tool the page's bytes could
// only be seen through the Python extension. Exit 2 with the library's error on bad input.
#include <cstdio>
#include <string>

#include "driftscope/file.hpp"
#include "driftscope/report.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: guard_page_tool REPORT.json\n");
    return 2;
  }
  auto text = driftscope::read_small_file(argv[1], 16u << 20);
  if (!text) {
    std::fprintf(stderr, "guard_page_tool: %s\n", text.error().to_string().c_str());
    return 2;
  }
  auto page = driftscope::guard_report_to_html(*text);
  if (!page) {
    std::fprintf(stderr, "guard_page_tool: %s\n", page.error().to_string().c_str());
    return 2;
  }
  std::fwrite(page->data(), 1, page->size(), stdout);
  return 0;
}

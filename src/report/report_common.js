// Helpers shared by the report pages (compare, guard, check), embedded into each page by the
// library (src/report/html_page.cpp) as a script before the page's own.
"use strict";
// Text from the dumps is shown as text (never parsed as markup), with what would trick a reader
// spelled out: the rule of driftscope::printable (include/driftscope/text.hpp).
function printable(s) {
  if (s === null || s === undefined) return "";
  s = String(s);
  let out = "";
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (c < 0x20 || c === 0x7f) out += "\\x" + c.toString(16).padStart(2, "0");
    else if ((c >= 0x80 && c <= 0x9f) || c === 0x61c || c === 0x200e || c === 0x200f ||
             (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) || c === 0x2028 || c === 0x2029)
      out += "\\u" + c.toString(16).padStart(4, "0");
    else out += ch;
  }
  return out;
}
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  for (const x of kids) e.append(x instanceof Node ? x : printable(x));
  return e;
}

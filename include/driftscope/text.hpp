// driftscope — making text from files safe to show.
//
// Names, op types, attribute and metadata values come from files written by anyone. Printed raw,
// an ESC or CSI sequence drives the reader's terminal (retitles it, rewrites earlier lines, hides
// text), a CR overwrites the line it is on, and a bidi override shows a name other than the one
// stored. Every text a driftscope tool prints for people goes through printable() once.
#pragma once

#include <string>
#include <string_view>

#include "driftscope/api.h"

namespace driftscope {

// `s` with everything a terminal would act on spelled out, as one valid UTF-8 line:
//  * a byte that is not part of valid UTF-8, C0 controls (TAB, LF and CR included) and DEL
//    become \xNN;
//  * C1 controls (U+0080..U+009F), the bidi controls (U+061C, U+200E, U+200F, U+202A..U+202E,
//    U+2066..U+2069) and the line and paragraph separators (U+2028, U+2029) become \uNNNN.
// Every other code point passes unchanged. A backslash is not escaped, so printable() of its own
// output changes nothing (a message that already quotes an escaped name can be escaped again);
// the result is for people to read, not to parse back.
DS_API std::string printable(std::string_view s);

}  // namespace driftscope

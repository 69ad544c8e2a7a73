// Unicode classes and byte-level helpers shared by the tokenizers.
//
// Invalid UTF-8 is never an error here: decoders report how many bytes a
// well-formed code point takes at a position, or 0 when the bytes there are
// not one, and callers treat such bytes one at a time.
// Thread-safety: pure functions over immutable tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/strings.h"
#include "base/utf8.h"

namespace kvs::tok {

// UTF-8 decoding/encoding (Utf8Next, AppendUtf8, ...) is base/utf8.h.

// Unicode White_Space (the set Oniguruma's \s matches).
bool IsUnicodeWhitespace(uint32_t cp);

// The GPT-2 byte-level alphabet: every byte maps to one printable code point
// (printable Latin-1 bytes map to themselves, the rest to U+0100..U+0143).
uint32_t ByteToUnicode(uint8_t b);
// Inverse of ByteToUnicode; -1 for code points outside the alphabet.
int UnicodeToByte(uint32_t cp);
// Maps every byte of `bytes` through ByteToUnicode and appends the UTF-8.
void AppendByteLevel(std::string_view bytes, std::string* out);
// Inverse of AppendByteLevel. Code points outside the alphabet are appended
// as their own UTF-8 (a malformed vocabulary entry, not an error).
void AppendFromByteLevel(std::string_view text, std::string* out);

// "<0x0A>" style byte-token text for b.
std::string ByteTokenText(uint8_t b);
// The byte of a "<0xXX>" token text, or -1.
int ParseByteToken(std::string_view text);

// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's visible space.
inline constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";

// ReplaceAll is base/strings.h.

}  // namespace kvs::tok

// UTF-8 and byte-level helpers shared by the tokenizers.
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

namespace kvs::tok {

// Length in bytes of the well-formed UTF-8 code point starting at s[i]
// (1..4), or 0 when the bytes there do not form one (bad lead byte,
// truncation, overlong form, surrogate, > U+10FFFF). *cp receives the code
// point when the result is non-zero.
size_t Utf8Next(std::string_view s, size_t i, uint32_t* cp);

// Length of the longest prefix of s that is well-formed UTF-8.
size_t Utf8ValidPrefix(std::string_view s);

// Length of the longest prefix of s that ends on a code point boundary: s
// minus a trailing incomplete (but so far well-formed) multi-byte sequence.
// Used by incremental decoding to hold back bytes that may yet be completed.
size_t Utf8CompletePrefix(std::string_view s);

void AppendUtf8(uint32_t cp, std::string* out);

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

// Replaces every occurrence of `from` in s by `to`.
std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to);

}  // namespace kvs::tok

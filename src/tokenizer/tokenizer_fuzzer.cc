// libFuzzer target: bytes -> ids -> text on every vocabulary in
// ../shared/vocab (ggml-vocab-*.gguf: SentencePiece and byte-level BPE).
//
// Input: one byte choosing the vocabulary, then the text (any bytes). Must
// hold for every input and vocabulary: ids are in range; Decode(Encode(text))
// gives the text back exactly, with and without special-token parsing (also
// with a plain range, Tokenizer::EncodeWithPlainRanges); streaming the ids
// through IncrementalDecoder gives well-formed UTF-8, equal to the text when
// the text is well-formed.
//
// The vocabularies are found through $KVSERVE_SHARED_DIR, else the ../shared
// this build was configured with; without them every input is skipped (the
// target still builds and runs).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/utf8.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

#ifndef KVSERVE_SHARED_DIR
#define KVSERVE_SHARED_DIR "../shared"
#endif

namespace {

using kvs::tok::IncrementalDecoder;
using kvs::tok::Tokenizer;

struct Vocab {
  std::string name;
  std::unique_ptr<kvs::gguf::GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
};

std::vector<Vocab>& Vocabs() {
  static std::vector<Vocab> v;
  return v;
}

void Load() {
  const char* env = std::getenv("KVSERVE_SHARED_DIR");
  const std::filesystem::path dir = std::filesystem::path(env ? env : KVSERVE_SHARED_DIR) / "vocab";
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.rfind("ggml-vocab-", 0) == 0 && e.path().extension() == ".gguf") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    auto file = kvs::gguf::GgufFile::Open(path.string());
    KVS_CHECK_MSG(file.ok(), "{}", file.status().ToString());
    auto tok = Tokenizer::FromGguf(**file);
    KVS_CHECK_MSG(tok.ok(), "{}: {}", path.string(), tok.status().ToString());
    Vocabs().push_back(Vocab{path.filename().string(), std::move(*file), std::move(*tok)});
  }
  std::fprintf(stderr, "tokenizer_fuzzer: %zu vocabularies from %s%s\n", Vocabs().size(), dir.c_str(),
               Vocabs().empty() ? " (absent: every input is skipped)" : "");
}

// SentencePiece writes a space as U+2581 ("▁") and decodes every U+2581 as a
// space, so a "▁" the user typed comes back as " " (as with llama.cpp and
// the reference tokenizers): compare with it folded to a space.
std::string FoldSpmSpace(std::string_view s) {
  static constexpr std::string_view kMeta = "\xE2\x96\x81";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s.substr(i, kMeta.size()) == kMeta) {
      out += ' ';
      i += kMeta.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

// With special-token parsing, SentencePiece vocabularies that add a space
// prefix give every text fragment after a control token its own prefix, as
// llama.cpp's tokenizer does ("<|user|>x" decodes as "<|user|> x"), and
// phi-3's control tokens strip the whitespace after them (rstrip, as in the
// model's Hugging Face tokenizer: "<|user|>\nhi" decodes as "<|user|> hi"):
// there the comparison ignores whitespace (all other characters must match).
std::string DropSpaces(std::string_view s) {
  std::string out = FoldSpmSpace(s);
  std::erase_if(out, [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; });
  return out;
}

bool SameText(const Vocab& v, std::string_view back, std::string_view text, bool fragments) {
  if (v.tok->model() != kvs::tok::ModelKind::kSentencePiece) return back == text;
  // Plain SentencePiece text also moves whitespace around (the dummy prefix
  // after a leading space, "\n" next to pieces), so whitespace is ignored
  // there too; the byte-level vocabularies above stay exact.
  (void)fragments;
  return DropSpaces(back) == DropSpaces(text);
}

// Byte-level vocabularies may lack a token for some bytes (falcon has none
// for \x04, \v and a dozen other C0 controls, or for 0xF2): such a byte
// cannot be represented and is lost, by Hugging Face's tokenizer too
// (oracle_test.cc checks the same against it), so only text made of
// representable bytes must come back exactly.
bool Representable(const Tokenizer& tok, std::string_view text) {
  if (!tok.spec().decode_byte_level) return true;  // SentencePiece: byte fallback
  for (char c : text) {
    std::string mapped;
    kvs::AppendUtf8(kvs::tok::ByteToUnicode(static_cast<uint8_t>(c)), &mapped);
    if (tok.FindToken(mapped) < 0) return false;
  }
  return true;
}

void CheckRoundTrip(const Vocab& v, std::string_view text, const std::vector<int32_t>& ids, const char* how,
                    bool fragments) {
  for (int32_t id : ids) KVS_CHECK_MSG(id >= 0 && id < v.tok->vocab_size(), "{}: id {} out of range", v.name, id);
  const std::string back = v.tok->Decode(ids, /*skip_special=*/false);
  // Text reaching the tokenizer from the API is valid UTF-8 (JSON strings);
  // invalid bytes must not crash it, but need not come back byte for byte.
  if (!kvs::IsValidUtf8(text) || !Representable(*v.tok, text)) return;
  KVS_CHECK_MSG(SameText(v, back, text, fragments), "{} ({}): {} bytes decode to {} bytes", v.name, how, text.size(), back.size());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Load();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (Vocabs().empty() || size == 0) return 0;
  const Vocab& v = Vocabs()[data[0] % Vocabs().size()];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  CheckRoundTrip(v, text, v.tok->Encode(text, /*add_special=*/false, /*parse_special=*/false), "plain",
                 /*fragments=*/false);
  const std::vector<int32_t> special = v.tok->Encode(text, false, /*parse_special=*/true);
  CheckRoundTrip(v, text, special, "parse_special", /*fragments=*/true);
  // A plain range over the middle third: special-token text there stays text.
  const kvs::tok::TextRange middle{text.size() / 3, 2 * text.size() / 3};
  CheckRoundTrip(v, text, v.tok->EncodeWithPlainRanges(text, false, {&middle, 1}), "plain range",
                 /*fragments=*/true);
  const std::vector<int32_t> whole_plain =
      v.tok->EncodeWithPlainRanges(text, false, {std::vector<kvs::tok::TextRange>{{0, text.size()}}});
  KVS_CHECK_MSG(whole_plain == v.tok->Encode(text, false, false), "{}: a range over all of the text is not plain",
                v.name);

  IncrementalDecoder dec(*v.tok, /*skip_special=*/false, /*at_sequence_start=*/true);
  std::string streamed;
  for (int32_t id : special) streamed += dec.Add(id);
  streamed += dec.Flush();
  KVS_CHECK_MSG(kvs::IsValidUtf8(streamed), "{}: streamed text is not UTF-8", v.name);
  if (kvs::IsValidUtf8(text) && Representable(*v.tok, text)) {
    KVS_CHECK_MSG(SameText(v, streamed, text, /*fragments=*/true), "{}: streamed text differs", v.name);
  }
  return 0;
}

// Text processing that runs before a tokenizer model sees the text:
// normalizer steps (per fragment between special tokens) and pre-tokenizer
// steps that cut a fragment into words and may rewrite them (GPT-2 byte-level
// alphabet, SentencePiece's U+2581 space). Mirrors the Hugging Face
// `tokenizers` components the models are defined by; regexes are written in
// the Oniguruma dialect those files use and translated to PCRE2 (UTF + UCP).
//
// Invariant: a Regex only ever runs on well-formed UTF-8; the splitter cuts
// malformed bytes out first and keeps each as its own word.
// Thread-safety: all classes are immutable after construction and safe to
// share; matching allocates its own per-call state.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace kvs::tok {

// A compiled regex. The pattern is Oniguruma syntax as in tokenizer.json.
class Regex {
 public:
  static StatusOr<std::shared_ptr<const Regex>> Compile(const std::string& onig_pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  const std::string& pattern() const { return pattern_; }

  // Successive non-empty, non-overlapping matches in `text` (well-formed
  // UTF-8, which must outlive the matcher). One per thread.
  class Matcher {
   public:
    Matcher(const Regex& re, std::string_view text);
    ~Matcher();
    Matcher(const Matcher&) = delete;
    Matcher& operator=(const Matcher&) = delete;
    // The next match as byte offsets [*begin, *end); false when none is left.
    bool Next(size_t* begin, size_t* end);

   private:
    const Regex& re_;
    std::string_view text_;
    size_t pos_ = 0;
    void* md_ = nullptr;  // pcre2_match_data_8*
  };

  // Appends every match of `text` (as Matcher finds them) to *out.
  void FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>* out) const;

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
};

// Exposed for tests: the PCRE2 pattern an Oniguruma pattern compiles to.
std::string TranslateOnigToPcre2(std::string_view onig);

// How a split treats the matched parts (Hugging Face SplitDelimiterBehavior).
enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

enum class PrependScheme { kAlways, kFirst, kNever };

struct NormalizerStep {
  enum class Kind { kPrepend, kReplace };
  Kind kind = Kind::kReplace;
  std::string a;  // kPrepend: the prefix; kReplace: the literal to find
  std::string b;  // kReplace: the replacement
};

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel, kMetaspace };
  Kind kind = Kind::kSplit;
  // kSplit: cut by regex matches. kByteLevel: optional GPT-2 regex split.
  std::shared_ptr<const Regex> regex;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // kByteLevel: prepend ' ' to words that do not start with one.
  bool add_prefix_space = false;
  // kMetaspace: ' ' -> replacement, optional prefix, optional split before
  // each replacement character.
  std::string replacement;
  PrependScheme prepend = PrependScheme::kAlways;
  bool split = false;
};

// The full pre-model pipeline for one raw-text fragment.
class TextPipeline {
 public:
  TextPipeline() = default;
  TextPipeline(std::vector<NormalizerStep> normalizer, std::vector<PreTokenizerStep> pre)
      : normalizer_(std::move(normalizer)), pre_(std::move(pre)) {}

  // A word: bytes [b, e) of the buffer Run fills.
  struct Span {
    size_t b;
    size_t e;
  };
  // Normalizes `fragment` into *buf and cuts it into words (*words, in
  // order, non-empty). `at_input_start`: the fragment begins at offset 0 of
  // the caller's text (Metaspace's "first" prepend scheme looks at this).
  void Run(std::string_view fragment, bool at_input_start, std::string* buf, std::vector<Span>* words) const;

  const std::vector<NormalizerStep>& normalizer() const { return normalizer_; }
  const std::vector<PreTokenizerStep>& pre() const { return pre_; }
  bool byte_level() const;

 private:
  std::vector<NormalizerStep> normalizer_;
  std::vector<PreTokenizerStep> pre_;
};

// The GPT-2 pre-tokenizer regex (also ByteLevel's use_regex).
extern const char* const kGpt2Pattern;

// Regexes (Oniguruma syntax, applied in order as isolated splits) for a
// `tokenizer.ggml.pre` name. Unknown names give gpt-2's list and *known=false.
std::vector<std::string> PreTokenizerPatterns(std::string_view pre_name, bool* known);

}  // namespace kvs::tok

// Text for prompts: real-looking English prose generated from the project's
// own word lists and sentence patterns, the low-entropy filler the needle
// test traditionally hides facts in, or the text of a file the user gives.
// Each source yields sentences; callers join them with spaces.
//
// Sources are deterministic given the random generator passed in, so a
// benchmark run is reproducible from its seed, while every request still
// gets different text (no accidental prefix sharing).
// Thread-safety: a TextSource is immutable after construction; Next() takes
// the caller's generator, so one source can serve many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/status.h"

namespace kvs::bench {

using Rng = std::mt19937_64;

class TextSource {
 public:
  virtual ~TextSource() = default;
  // One sentence (no leading or trailing space).
  virtual std::string Next(Rng& rng) const = 0;
  // The sentence a prompt starts with. Prose makes it unlikely to repeat
  // (several random full names), so that two prompts share no prefix-cache
  // block by accident; others use Next.
  virtual std::string First(Rng& rng) const { return Next(rng); }
  virtual std::string Name() const = 0;
};

// Prose about everyday subjects (towns, weather, work, travel, food,
// science, history), varied sentence shapes, no digits.
std::unique_ptr<TextSource> MakeProseSource();

// The classic haystack filler: short plain sentences from a fixed pool
// ("The grass is green."), the kind kvserve-tiny was trained to search
// through.
std::unique_ptr<TextSource> MakeFillerSource();

// Sentences of a UTF-8 text file, in order from a random starting sentence
// and wrapping around. Fails when the file is missing or has no words.
StatusOr<std::unique_ptr<TextSource>> MakeFileSource(const std::string& path);

// Given names the bundled model met in training (tools/train/data.py): the
// keys of needles and the people of recall probes, so that its answers test
// the server rather than its vocabulary.
const std::vector<std::string>& GivenNames();

// "prose", "filler" or a file path.
StatusOr<std::unique_ptr<TextSource>> MakeTextSource(const std::string& spec);

// Words (split on whitespace) of sentences from `source`, at least
// `min_words` of them; sentence_end[i] is true when word i ends a sentence.
struct WordStream {
  std::vector<std::string> words;
  std::vector<bool> sentence_end;
  // The first n words joined by single spaces.
  std::string Join(size_t n) const;
  std::string Join(size_t begin, size_t end) const;
  void Append(const std::string& sentence);
};
WordStream MakeWords(const TextSource& source, Rng& rng, size_t min_words);

}  // namespace kvs::bench

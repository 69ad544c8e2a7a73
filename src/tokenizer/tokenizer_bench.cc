// Encode / decode speed on 1 MB of mixed English prose and code, for each
// vocabulary in ../shared (SentencePiece and byte-level BPE), on one thread.
//   build/<dir>/src/tokenizer/tokenizer_bench [--benchmark_filter=...]
// Reports bytes_per_second (MB/s of input text) and tokens.
#include <cstdio>
#include <memory>
#include <random>
#include <string>

#include <benchmark/benchmark.h>

#include "base/test_util.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace kvs::tok {
namespace {

// Deterministic 1 MB text: English sentences with punctuation, numbers and
// contractions, interleaved with C++/Python code blocks.
std::string MixedText(size_t bytes) {
  static const char* const kWords[] = {
      "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on",
      "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they",
      "you", "were", "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when",
      "will", "would", "who", "so", "no", "model", "server", "memory", "request", "cache", "token", "latency",
      "throughput", "scheduler", "attention", "context", "window", "batch", "sequence", "kernel", "compute",
      "Lily", "garden", "morning", "beautiful", "quickly", "understand", "everything", "government",
      "international", "development", "information", "particularly", "nevertheless", "tokenization"};
  static const char* const kCode[] = {
      "\n\n```cpp\nfor (int i = 0; i < n; ++i) {\n    sum += a[i] * b[i];\n}\nreturn sum;\n```\n\n",
      "\n\n```python\ndef softmax(x):\n    e = np.exp(x - x.max(axis=-1, keepdims=True))\n    return e / e.sum(-1)\n```\n\n",
      "\n\n    if (status.ok()) { queue_.push_back(std::move(req)); }  // enqueue\n\n",
      "\n\n{\"model\": \"llama-3\", \"max_tokens\": 256, \"temperature\": 0.7, \"stream\": true}\n\n",
      "\n\n#include <vector>\n#include <string>\nstatic constexpr int kBlockSize = 16;\n\n"};
  std::mt19937 rng(42);
  std::string s;
  s.reserve(bytes + 256);
  while (s.size() < bytes) {
    const int sentence = 5 + rng() % 15;
    for (int w = 0; w < sentence; ++w) {
      std::string word = kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
      if (w == 0) word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
      s += word;
      const unsigned r = rng() % 20;
      if (r == 0) s += ",";
      else if (r == 1) s += "'s";
      else if (r == 2) s += " " + std::to_string(rng() % 10000);
      if (w + 1 < sentence) s += " ";
    }
    s += (rng() % 5 == 0) ? "?" : ".";
    s += (rng() % 6 == 0) ? "\n\n" : " ";
    if (rng() % 12 == 0) s += kCode[rng() % (sizeof(kCode) / sizeof(kCode[0]))];
  }
  s.resize(bytes);
  // Do not end inside a multi-byte character (the text is ASCII, but stay safe).
  while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0x80)) s.pop_back();
  return s;
}

const std::string& Text() {
  static const std::string t = MixedText(1 << 20);
  return t;
}

// The tokenizer of ../shared/<rel>; null (the benchmark skipped with the
// reason) when the file is absent or does not load.
std::unique_ptr<Tokenizer> LoadTokenizer(benchmark::State& state, const std::string& rel) {
  const std::string path = testing::SharedPath(rel);
  if (path.empty()) {
    state.SkipWithError(("../shared/" + rel + " is absent").c_str());
    return nullptr;
  }
  auto file = gguf::GgufFile::Open(path);
  if (!file.ok()) {
    state.SkipWithError(file.status().ToString().c_str());
    return nullptr;
  }
  auto tok = Tokenizer::FromGguf(**file);
  if (!tok.ok()) {
    state.SkipWithError(tok.status().ToString().c_str());
    return nullptr;
  }
  return std::move(*tok);
}

void BM_Encode(benchmark::State& state, const std::string& rel) {
  const std::unique_ptr<Tokenizer> tok = LoadTokenizer(state, rel);
  if (!tok) return;
  const std::string& text = Text();
  size_t tokens = 0;
  for (auto _ : state) {
    std::vector<int32_t> ids = tok->Encode(text, false, false);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}

void BM_Decode(benchmark::State& state, const std::string& rel) {
  const std::unique_ptr<Tokenizer> tok = LoadTokenizer(state, rel);
  if (!tok) return;
  const std::vector<int32_t> ids = tok->Encode(Text(), false, false);
  for (auto _ : state) {
    std::string s = tok->Decode(ids, true);
    benchmark::DoNotOptimize(s.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * Text().size()));
  state.counters["tokens"] = static_cast<double>(ids.size());
}

BENCHMARK_CAPTURE(BM_Encode, stories260K_spm, std::string("models/stories260K.gguf"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, llama_spm, std::string("vocab/ggml-vocab-llama-spm.gguf"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, gpt2_bpe, std::string("vocab/ggml-vocab-gpt-2.gguf"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, deepseek_coder_bpe, std::string("vocab/ggml-vocab-deepseek-coder.gguf"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, falcon_bpe, std::string("vocab/ggml-vocab-falcon.gguf"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, llama_spm, std::string("vocab/ggml-vocab-llama-spm.gguf"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, gpt2_bpe, std::string("vocab/ggml-vocab-gpt-2.gguf"))->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvs::tok

BENCHMARK_MAIN();

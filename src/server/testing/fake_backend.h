// FakeBackend: an InferenceBackend with no model, for tests of the HTTP
// service (in-process, and kvserve_fake for the integration tests; part of
// the test-only library kvs_server_testing). It behaves like a small
// continuous-batching engine, deterministically:
//
//   * vocabulary: 0 <unk>, 1 <s> (BOS), 2 </s> (EOS), 3..258 the bytes
//     0..255, then word pieces of one short story (" upon", " a", ...);
//     Tokenize matches the longest word piece, else a byte; "<s>"/"</s>"
//     in text are the special tokens.
//   * generation: the story, token by token, from its start when
//     temperature is 0, from story position seed % length when seeded (a
//     random position otherwise); EOS at the story's end (finish "stop";
//     with ignore_eos it wraps around), "length" at max_tokens. The story
//     contains "café" whose "é" is two byte tokens, so clients see a token
//     that completes no text on its own.
//   * scheduling: one engine thread; every step_time it admits waiting
//     requests (FCFS) up to max_batch_size and gives each running request
//     one token. Requests beyond max_batch_size wait (queue time).
//   * KV accounting: a running request holds ceil(tokens / block_size)
//     blocks; prompt blocks are remembered as a prefix cache (whole blocks,
//     never the last prompt token, within the request's cache_salt),
//     reported as cached tokens and counters.
//   * logprobs: a fixed pattern (-0.05 - 0.1 * (i % 5) for the chosen
//     token; alternatives lower).
//   * chat template: "<s>", then "[role] content\n" per message (after a
//     "[tools] ..." line, and a "[kwargs] {json}" line for extra template
//     variables), then "[assistant]". With `reasoning_template` a reasoning
//     model's: the generation prompt ends "<think>\n" (an opened section),
//     or "<think>\n\n</think>\n\n" with enable_thinking false; a prompt
//     that ends inside the section is answered with ReasoningScript()
//     (thinking text, "</think>", a blank line) before the story.
// Thread-safety: as InferenceBackend (all methods from any thread).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "server/backend.h"

namespace kvs::server {

struct FakeBackendOptions {
  std::string model_name = "fake-model";
  std::string model_path;
  int64_t max_context_length = 4096;
  int64_t max_batch_size = 32;
  int64_t block_size = 16;
  int64_t num_blocks = 4096;
  bool prefix_caching = true;
  std::chrono::microseconds step_time{2000};  // one decode step
  // Tests: called at the start of every Tokenize (e.g. to hold a request in
  // preparation until the test lets it go).
  std::function<void()> before_tokenize;
  // Tests: sees every request Submit accepts.
  std::function<void(const engine::Request&)> on_submit;
  // Tests: the prefix-cache event log CacheEvents pages (nullptr: none, so
  // GET /v1/cache/blocks is a 404; it must outlive the backend), and the
  // sliding window Stats reports (0: no window group).
  kvcache::PrefixCacheEvents* cache_events = nullptr;
  int32_t window = 0;
  // A reasoning model's template and scripted thinking (see above), and
  // the format ReasoningFormat() reports (the server's parser).
  bool reasoning_template = false;
  grammar::ReasoningFormat reasoning_format;
};

class FakeBackend : public InferenceBackend {
 public:
  explicit FakeBackend(FakeBackendOptions options);
  ~FakeBackend() override;

  const ModelInfo& Info() const override { return info_; }
  StatusOr<std::vector<int32_t>> Tokenize(std::string_view text, bool add_special) override;
  StatusOr<std::string> Detokenize(std::span<const int32_t> ids) override;
  std::string TokenString(int32_t id) override { return Piece(id); }
  StatusOr<ChatPrompt> RenderChatPrompt(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                        bool add_generation_prompt, const nlohmann::ordered_json& template_kwargs) override;
  grammar::ReasoningFormat ReasoningFormat() override { return opt_.reasoning_format; }
  using InferenceBackend::Submit;
  Status Submit(engine::ValidatedRequest request, Executor executor, ChunkCallback on_chunk) override;
  void Cancel(const std::string& request_id) override;
  BackendStats Stats() override;
  void Shutdown() override;
  std::optional<kvcache::CacheEventsPage> CacheEvents(uint64_t epoch, uint64_t since, size_t max_events) override;

  static constexpr int32_t kBos = 1;
  static constexpr int32_t kEos = 2;
  // The story as token ids (what temperature 0 generates, then EOS).
  static const std::vector<int32_t>& StoryTokens();
  // A token's bytes ("" for specials).
  static std::string Piece(int32_t id);
  // What a reasoning_template model thinks before the story.
  static const std::string& ReasoningScript();

 private:
  // The tokenizer; parse_special: "<s>"/"</s>" become BOS/EOS (else bytes).
  std::vector<int32_t> Encode(std::string_view text, bool add_special, bool parse_special) const;
  struct Seq {
    engine::Request req;
    Executor executor;
    ChunkCallback cb;
    std::chrono::steady_clock::time_point arrival;
    size_t story_pos = 0;
    std::vector<int32_t> script;  // tokens generated before the story (reasoning)
    int32_t generated = 0;
    int32_t cached = 0;
    bool first_token_sent = false;
    std::string utf8_pending;  // bytes of an incomplete UTF-8 sequence
  };

  void Loop();
  // Posts a chunk to the request's executor (the final one drops it).
  static void Deliver(Seq& s, GenerationChunk chunk);
  // Under mu_: the request's prefix-cache hit in tokens, and remember its blocks.
  int32_t LookupAndInsertPrefix(const std::vector<int32_t>& prompt, const std::string& salt);
  int64_t UsedBlocksLocked() const;

  FakeBackendOptions opt_;
  ModelInfo info_;

  std::mutex shutdown_mu_;  // serializes Shutdown (destructor after an explicit call)
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Seq>> waiting_;
  std::vector<std::shared_ptr<Seq>> running_;
  std::unordered_set<std::string> ids_;        // ids in flight
  std::unordered_set<std::string> cancelled_;  // ids to cancel at the next step
  std::unordered_set<uint64_t> prefix_blocks_;
  int64_t queried_tokens_ = 0, hit_tokens_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kvs::server

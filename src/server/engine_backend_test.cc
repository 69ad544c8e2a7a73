// EngineBackend on the real stories260K model: load, tokenize, generate
// (output drained through an executor), cancel (KV freed), chat template, shutdown delivering
// final chunks. Skips when ../shared is absent.
#include "server/engine_backend.h"

#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "base/test_util.h"

namespace kvs::server {
namespace {

// Collects one request's chunks; `done` is set by the final one.
struct Sink {
  std::mutex mu;
  std::vector<GenerationChunk> chunks;
  std::promise<void> done;
  int finals = 0;
  ChunkCallback Callback() {
    return [this](GenerationChunk c) {
      std::lock_guard<std::mutex> lock(mu);
      const bool last = c.finished();
      chunks.push_back(std::move(c));
      if (last && ++finals == 1) done.set_value();
    };
  }
  std::string Text() {
    std::lock_guard<std::mutex> lock(mu);
    std::string t;
    for (const auto& c : chunks) {
      for (const auto& tok : c.tokens) t += tok.text;
      t += c.text_tail;
    }
    return t;
  }
  size_t Tokens() {
    std::lock_guard<std::mutex> lock(mu);
    size_t n = 0;
    for (const auto& c : chunks) n += c.tokens.size();
    return n;
  }
};

ServeConfig Config(const std::string& path) {
  ServeConfig c;
  c.model.path = path;
  c.runtime.threads = 2;
  c.runtime.max_concurrent_requests = 8;
  return c;
}

TEST(EngineBackendTest, GeneratesCancelsAndShutsDown) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  auto b = EngineBackend::Load(Config(path));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EngineBackend& be = **b;
  EXPECT_EQ(be.Info().limits.max_context_length, 2048);  // the model's, below the config's 32768
  EXPECT_EQ(be.Info().limits.vocab_size, 512);
  {
    // Idle: every block is available; the context length caps the figure.
    const BackendStats st = be.Stats();
    EXPECT_EQ(st.engine.max_admissible_tokens,
              static_cast<int64_t>(st.engine.num_blocks_free + st.engine.num_blocks_cached) * st.engine.block_size);
    EXPECT_EQ(st.max_admissible_context, std::min<int64_t>(2048, st.engine.max_admissible_tokens));
  }

  auto ids = be.Tokenize("Once upon a time", true);
  ASSERT_TRUE(ids.ok());
  ASSERT_GT(ids->size(), 2u);
  auto text = be.Detokenize(*ids);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "Once upon a time");
  EXPECT_FALSE(be.Detokenize(std::vector<int32_t>{100000}).ok());

  // Greedy generation; the drains run wherever the ready signal fires.
  const Executor inline_executor = [](std::function<void()> fn) { fn(); };
  Sink a;
  engine::Request g;
  g.request_id = "a";
  g.prompt_token_ids = *ids;
  g.sampling.temperature = 0;
  g.sampling.max_tokens = 12;
  g.sampling.logprobs = 2;
  ASSERT_TRUE(be.Submit(g, inline_executor, a.Callback()).ok());
  ASSERT_EQ(a.done.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_EQ(a.chunks.back().finish, engine::FinishReason::kLength);
  EXPECT_EQ(a.Tokens(), 12u);
  EXPECT_FALSE(a.Text().empty());
  EXPECT_EQ(a.chunks.front().tokens.front().top_logprobs.size(), 2u);
  EXPECT_EQ(a.chunks.back().num_output_tokens, 12);

  // Cancel frees the KV.
  Sink c;
  g.request_id = "long";
  g.sampling.max_tokens = 1500;
  g.sampling.ignore_eos = true;
  g.sampling.logprobs.reset();
  ASSERT_TRUE(be.Submit(g, inline_executor, c.Callback()).ok());
  for (int i = 0; i < 500 && c.Tokens() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_GT(be.Stats().engine.num_blocks_used, 0);
  be.Cancel("long");
  ASSERT_EQ(c.done.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(c.chunks.back().finish, engine::FinishReason::kCancelled);
  for (int i = 0; i < 200 && be.Stats().engine.num_blocks_used != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(be.Stats().engine.num_blocks_used, 0);
  be.Cancel("unknown-id");  // a no-op

  // Too long for the context: refused with OutOfRange, nothing delivered.
  engine::Request big = g;
  big.request_id = "big";
  big.sampling.max_tokens = 4000;
  Sink unused;
  EXPECT_EQ(be.Submit(big, inline_executor, unused.Callback()).code(), StatusCode::kOutOfRange);

  // Chat template (ChatML fallback: the model has none).
  auto prompt = be.RenderChatPrompt(nlohmann::ordered_json::parse(R"([{"role":"user","content":"hi"}])"),
                                    nlohmann::ordered_json::array(), true, nlohmann::ordered_json::object());
  ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
  EXPECT_NE(prompt->text.find("hi"), std::string::npos);
  auto whole = be.Tokenize(prompt->text, /*add_special=*/false);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(prompt->tokens, *whole);  // honest content: the same tokens as the whole text

  // Shutdown ends live requests with a final chunk.
  Sink s;
  g.request_id = "live";
  ASSERT_TRUE(be.Submit(g, inline_executor, s.Callback()).ok());
  be.Shutdown();
  ASSERT_EQ(s.done.get_future().wait_for(std::chrono::seconds(1)), std::future_status::ready);
  EXPECT_EQ(s.finals, 1);
  EXPECT_EQ(be.Submit(g, inline_executor, unused.Callback()).code(), StatusCode::kUnavailable);
}

TEST(EngineBackendTest, KvPoolTooSmallFailsNamingTheKnobs) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  ServeConfig c = Config(path);
  c.kv_cache.memory_fraction = 1e-9;
  auto b = EngineBackend::Load(c);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("kv_cache.memory_fraction"), std::string::npos) << b.status().ToString();
}

}  // namespace
}  // namespace kvs::server

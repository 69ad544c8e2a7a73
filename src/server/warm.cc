#include "server/warm.h"

#include <chrono>
#include <condition_variable>
#include <mutex>

#include <nlohmann/json.hpp>

#include "base/line_file.h"

namespace kvs::server {

namespace {

// Runs one prompt to its first token and waits for the final chunk.
Status RunOne(InferenceBackend& backend, std::vector<int32_t> tokens, int line) {
  engine::Request r;
  r.request_id = "warm-" + std::to_string(line);
  r.prompt_token_ids = std::move(tokens);
  r.sampling.max_tokens = 1;
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  auto validated = engine::ValidatedRequest::Validate(std::move(r), backend.Info().limits);
  if (!validated.ok()) return InvalidArgument("line {}: {}", line, validated.status().message());
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status result;
  KVS_RETURN_IF_ERROR(backend.Submit(
      std::move(*validated), [](std::function<void()> f) { f(); },
      [&](GenerationChunk c) {
        if (!c.finished()) return;
        std::lock_guard<std::mutex> lock(mu);
        if (c.finish == engine::FinishReason::kError) result = c.error;
        done = true;
        cv.notify_all();
      }));
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  return result;
}

}  // namespace

StatusOr<WarmResult> WarmPrefixCache(InferenceBackend& backend, const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  WarmResult out;
  auto warm_line = [&](const std::string& line, size_t b, int line_no) -> Status {
    std::string text;
    std::vector<int32_t> chat_tokens;
    bool chat = false;
    if (line[b] == '{') {
      const auto j = nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object()) return InvalidArgument("{}:{}: not a JSON object", path, line_no);
      if (j.contains("prompt") && j["prompt"].is_string()) {
        text = j["prompt"].get<std::string>();
      } else if (j.contains("messages") && j["messages"].is_array()) {
        // As requests with these messages will be tokenized (their prefix must match).
        auto rendered = backend.RenderChatPrompt(j["messages"], nlohmann::ordered_json::array(), false,
                                                 nlohmann::ordered_json::object());
        if (!rendered.ok()) return InvalidArgument("{}:{}: {}", path, line_no, rendered.status().message());
        chat_tokens = std::move(rendered->tokens);
        chat = true;
      } else {
        return InvalidArgument("{}:{}: expected {{\"prompt\": string}} or {{\"messages\": [...]}}", path, line_no);
      }
    } else {
      text = line;
    }
    auto tokens = chat ? StatusOr<std::vector<int32_t>>(std::move(chat_tokens)) : backend.Tokenize(text, /*add_special=*/true);
    if (!tokens.ok()) return InvalidArgument("{}:{}: {}", path, line_no, tokens.status().message());
    out.tokens += static_cast<int64_t>(tokens->size());
    Status run = RunOne(backend, std::move(*tokens), line_no);
    if (!run.ok()) return run.WithContext(path);
    ++out.prompts;
    return Status::Ok();
  };
  bool line_failed = false;
  Status st = ForEachContentLine(path, [&](const std::string& line, size_t b, int line_no) {
    Status s = warm_line(line, b, line_no);
    line_failed = !s.ok();
    return s;
  });
  // A prompt's errors name the file and line already; the file's own name the config key.
  if (!st.ok()) return line_failed ? st : st.WithContext("kv_cache.warm_prompts_file");
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace kvs::server

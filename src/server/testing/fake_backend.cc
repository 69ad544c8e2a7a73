#include "server/testing/fake_backend.h"

#include <algorithm>
#include <filesystem>
#include <random>

namespace kvs::server {

namespace {

constexpr int32_t kByteBase = 3;
constexpr int32_t kWordBase = 259;

// The story as pieces; "\xC3" and "\xA9" are byte tokens (the two bytes of é).
const std::vector<std::string>& StoryPieces() {
  static const std::vector<std::string> p = {
      "Once", " upon", " a", " time", ",", " there", " was", " a", " little", " girl", " named", " Lily", ".",
      " She", " loved", " to", " play", " in", " the", " park", ".", " One", " day", ",", " she", " went", " to",
      " a", " caf", "\xC3", "\xA9", " with", " her", " mom", ".", " They", " ate", " cake", " and", " drank",
      " milk", ".", "\n", "The", " end", "."};
  return p;
}

// Distinct multi-byte pieces of the story, in first-seen order.
const std::vector<std::string>& Words() {
  static const std::vector<std::string> w = [] {
    std::vector<std::string> out;
    for (const auto& p : StoryPieces()) {
      if (p.size() == 1 && static_cast<unsigned char>(p[0]) >= 0x80) continue;  // byte tokens
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    }
    return out;
  }();
  return w;
}

int32_t IdOf(const std::string& piece) {
  const auto& w = Words();
  auto it = std::find(w.begin(), w.end(), piece);
  if (it != w.end()) return kWordBase + static_cast<int32_t>(it - w.begin());
  KVS_CHECK(piece.size() == 1);
  return kByteBase + static_cast<unsigned char>(piece[0]);
}

// Length of the longest prefix of s that does not end inside a UTF-8 sequence.
size_t CompleteUtf8Prefix(const std::string& s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    size_t need = 1;
    if ((c & 0xE0) == 0xC0) {
      need = 2;
    } else if ((c & 0xF0) == 0xE0) {
      need = 3;
    } else if ((c & 0xF8) == 0xF0) {
      need = 4;
    }
    return back < need ? n - back : n;
  }
  return n;
}

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

}  // namespace

const std::vector<int32_t>& FakeBackend::StoryTokens() {
  static const std::vector<int32_t> t = [] {
    std::vector<int32_t> out;
    for (const auto& p : StoryPieces()) out.push_back(IdOf(p));
    return out;
  }();
  return t;
}

std::string FakeBackend::Piece(int32_t id) {
  if (id >= kByteBase && id < kWordBase) return std::string(1, static_cast<char>(id - kByteBase));
  if (id >= kWordBase && id < kWordBase + static_cast<int32_t>(Words().size())) return Words()[id - kWordBase];
  return {};
}

const std::string& FakeBackend::ReasoningScript() {
  static const std::string s = "The user wants a story. One about Lily at the caf\xC3\xA9 will do.\n</think>\n\n";
  return s;
}

FakeBackend::FakeBackend(FakeBackendOptions options) : opt_(std::move(options)) {
  info_.name = opt_.model_name;
  info_.path = opt_.model_path;
  info_.architecture = "fake";
  info_.trained_context_length = opt_.max_context_length;
  info_.limits.vocab_size = kWordBase + static_cast<int32_t>(Words().size());
  info_.limits.max_context_length = static_cast<int32_t>(opt_.max_context_length);
  info_.limits.block_size = static_cast<int32_t>(opt_.block_size);
  info_.limits.num_blocks = static_cast<int32_t>(opt_.num_blocks);
  info_.has_chat_template = true;
  thread_ = std::thread([this] { Loop(); });
}

FakeBackend::~FakeBackend() { Shutdown(); }

StatusOr<std::vector<int32_t>> FakeBackend::Tokenize(std::string_view text, bool add_special) {
  if (opt_.before_tokenize) opt_.before_tokenize();
  return Encode(text, add_special, /*parse_special=*/true);
}

std::vector<int32_t> FakeBackend::Encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<int32_t> out;
  if (add_special) out.push_back(kBos);
  size_t i = 0;
  while (i < text.size()) {
    if (parse_special && text.substr(i, 4) == "</s>") {
      out.push_back(kEos);
      i += 4;
      continue;
    }
    if (parse_special && text.substr(i, 3) == "<s>") {
      out.push_back(kBos);
      i += 3;
      continue;
    }
    size_t best = 0;
    int32_t best_id = -1;
    for (size_t w = 0; w < Words().size(); ++w) {
      const std::string& p = Words()[w];
      if (p.size() > best && text.substr(i, p.size()) == p) {
        best = p.size();
        best_id = kWordBase + static_cast<int32_t>(w);
      }
    }
    if (best_id >= 0) {
      out.push_back(best_id);
      i += best;
    } else {
      out.push_back(kByteBase + static_cast<unsigned char>(text[i]));
      ++i;
    }
  }
  return out;
}

StatusOr<std::string> FakeBackend::Detokenize(std::span<const int32_t> ids) {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= info_.limits.vocab_size) {
      return InvalidArgument("token id {} is outside [0, {})", id, info_.limits.vocab_size);
    }
    out += Piece(id);
  }
  return out;
}

StatusOr<ChatPrompt> FakeBackend::RenderChatPrompt(const nlohmann::ordered_json& messages,
                                                   const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                                   const nlohmann::ordered_json& template_kwargs) {
  // As the real renderer: the template's text may hold "<s>", the request's
  // text is tokenized without special tokens.
  ChatPrompt p;
  auto add = [&](std::string_view text, bool from_request) {
    p.text += text;
    auto ids = Encode(text, /*add_special=*/false, /*parse_special=*/!from_request);
    p.tokens.insert(p.tokens.end(), ids.begin(), ids.end());
  };
  if (opt_.before_tokenize) opt_.before_tokenize();
  add("<s>", false);
  if (tools.is_array() && !tools.empty()) {
    add("[tools] ", false);
    add(tools.dump(), true);
    add("\n", false);
  }
  if (template_kwargs.is_object() && !template_kwargs.empty()) {
    add("[kwargs] ", false);
    add(template_kwargs.dump(), true);
    add("\n", false);
  }
  for (const auto& m : messages) {
    const std::string content = m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
    add("[" + m.value("role", std::string("user")) + "] ", false);
    add(content, true);
    add("\n", false);
  }
  if (add_generation_prompt) {
    add("[assistant]", false);
    if (opt_.reasoning_template) {
      const bool off = template_kwargs.is_object() && template_kwargs.value("enable_thinking", true) == false;
      add(off ? "<think>\n\n</think>\n\n" : "<think>\n", false);
    }
  }
  return p;
}

Status FakeBackend::Submit(engine::ValidatedRequest validated, Executor executor, ChunkCallback on_chunk) {
  if (!(validated.limits() == info_.limits)) {  // validated for other limits: as the engine, check anew
    KVS_ASSIGN_OR_RETURN(validated, engine::ValidatedRequest::Validate(std::move(validated).Release(), info_.limits));
  }
  engine::Request request = std::move(validated).Release();
  if (request.request_id.empty()) return InvalidArgument("request_id is empty");
  if (opt_.on_submit) opt_.on_submit(request);
  auto seq = std::make_shared<Seq>();
  const size_t story_len = StoryTokens().size() + 1;  // + EOS
  if (request.sampling.temperature == 0.0f) {
    seq->story_pos = 0;
  } else if (request.sampling.seed) {
    seq->story_pos = *request.sampling.seed % story_len;
  } else {
    seq->story_pos = std::random_device()() % story_len;
  }
  if (opt_.reasoning_template) {
    // A prompt that ends inside an opened section is answered by thinking first.
    const std::vector<int32_t> open = Encode("<think>\n", false, false);
    const auto& prompt = request.prompt_token_ids;
    if (prompt.size() >= open.size() && std::equal(open.begin(), open.end(), prompt.end() - open.size())) {
      seq->script = Encode(ReasoningScript(), false, false);
    }
  }
  seq->req = std::move(request);
  seq->executor = std::move(executor);
  seq->cb = std::move(on_chunk);
  seq->arrival = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Status(StatusCode::kUnavailable, "the backend is shutting down");
    if (!ids_.insert(seq->req.request_id).second) {
      return InvalidArgument("request id {} is already in flight", seq->req.request_id);
    }
    waiting_.push_back(std::move(seq));
  }
  cv_.notify_one();
  return Status::Ok();
}

void FakeBackend::Cancel(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ids_.count(request_id)) return;
    cancelled_.insert(request_id);
  }
  cv_.notify_one();
}

int32_t FakeBackend::LookupAndInsertPrefix(const std::vector<int32_t>& prompt, const std::string& salt) {
  queried_tokens_ += static_cast<int64_t>(prompt.size());
  if (!opt_.prefix_caching) return 0;
  const size_t bs = static_cast<size_t>(opt_.block_size);
  const size_t full = (prompt.size() - 1) / bs;  // never the last prompt token
  uint64_t h = 0;
  for (unsigned char c : salt) h = Mix(h, c);  // salts never share a block
  int32_t hit = 0;
  bool matching = true;
  for (size_t b = 0; b < full; ++b) {
    for (size_t k = 0; k < bs; ++k) h = Mix(h, static_cast<uint64_t>(prompt[b * bs + k]));
    if (matching && prefix_blocks_.count(h)) {
      hit += static_cast<int32_t>(bs);
    } else {
      matching = false;
      if (static_cast<int64_t>(prefix_blocks_.size()) < opt_.num_blocks) prefix_blocks_.insert(h);
    }
  }
  hit_tokens_ += hit;
  return hit;
}

int64_t FakeBackend::UsedBlocksLocked() const {
  int64_t used = 0;
  for (const auto& s : running_) {
    const int64_t tokens = static_cast<int64_t>(s->req.prompt_token_ids.size()) + s->generated;
    used += (tokens + opt_.block_size - 1) / opt_.block_size;
  }
  return used;
}

void FakeBackend::Loop() {
  const auto& story = StoryTokens();
  for (;;) {
    std::vector<std::pair<std::shared_ptr<Seq>, GenerationChunk>> out;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !waiting_.empty() || !running_.empty(); });
      if (stop_) return;
      auto finish = [&](std::shared_ptr<Seq> s, engine::FinishReason r) {
        GenerationChunk c;
        c.finish = r;
        c.text_tail = std::move(s->utf8_pending);
        ids_.erase(s->req.request_id);
        out.emplace_back(std::move(s), std::move(c));
      };
      if (!cancelled_.empty()) {
        for (auto it = running_.begin(); it != running_.end();) {
          if (cancelled_.count((*it)->req.request_id)) {
            finish(*it, engine::FinishReason::kCancelled);
            it = running_.erase(it);
          } else {
            ++it;
          }
        }
        for (auto it = waiting_.begin(); it != waiting_.end();) {
          if (cancelled_.count((*it)->req.request_id)) {
            finish(*it, engine::FinishReason::kCancelled);
            it = waiting_.erase(it);
          } else {
            ++it;
          }
        }
        cancelled_.clear();
      }
      const auto now = std::chrono::steady_clock::now();
      while (static_cast<int64_t>(running_.size()) < opt_.max_batch_size && !waiting_.empty()) {
        auto s = std::move(waiting_.front());
        waiting_.pop_front();
        s->cached = LookupAndInsertPrefix(s->req.prompt_token_ids, s->req.cache_salt);
        running_.push_back(std::move(s));
      }
      for (auto it = running_.begin(); it != running_.end();) {
        Seq& s = **it;
        const size_t story_len = story.size() + 1;
        const auto g = static_cast<size_t>(s.generated);
        const bool scripted = g < s.script.size();
        size_t pos = scripted ? 0 : (s.story_pos + g - s.script.size()) % story_len;
        if (!scripted && s.req.sampling.ignore_eos && pos == story.size()) {
          ++s.story_pos;  // skip EOS
          pos = 0;
        }
        const int32_t id = scripted ? s.script[g] : pos < story.size() ? story[pos] : kEos;
        ++s.generated;
        api::TokenOutput t;
        t.token_id = id;
        t.piece = Piece(id);
        s.utf8_pending += t.piece;
        const size_t complete = CompleteUtf8Prefix(s.utf8_pending);
        t.text = s.utf8_pending.substr(0, complete);
        s.utf8_pending.erase(0, complete);
        if (s.req.sampling.logprobs) {
          t.logprob = -0.05f - 0.1f * static_cast<float>(s.generated % 5);
          for (int k = 0; k < *s.req.sampling.logprobs; ++k) {
            api::TopLogprob tl;
            tl.token_id = k == 0 ? id : story[(pos + static_cast<size_t>(k)) % story.size()];
            tl.piece = Piece(tl.token_id);
            tl.logprob = k == 0 ? t.logprob : t.logprob - static_cast<float>(k);
            t.top_logprobs.push_back(std::move(tl));
          }
        }
        GenerationChunk c;
        c.tokens.push_back(std::move(t));
        if (!s.first_token_sent) {
          s.first_token_sent = true;
          c.num_cached_tokens = s.cached;
          c.queue_seconds = std::chrono::duration<double>(now - s.arrival).count();
        }
        const std::vector<int32_t>& stops = s.req.sampling.stop_token_ids;
        const bool is_stop = (id == kEos && !s.req.sampling.ignore_eos) ||
                             std::find(stops.begin(), stops.end(), id) != stops.end();
        const int64_t total = static_cast<int64_t>(s.req.prompt_token_ids.size()) + s.generated;
        engine::FinishReason reason = engine::FinishReason::kNone;
        if (is_stop) {
          reason = engine::FinishReason::kStop;
        } else if (s.generated >= s.req.sampling.max_tokens || total >= opt_.max_context_length) {
          reason = engine::FinishReason::kLength;
        }
        if (reason != engine::FinishReason::kNone) {
          c.finish = reason;
          c.text_tail = std::move(s.utf8_pending);
          ids_.erase(s.req.request_id);
          out.emplace_back(*it, std::move(c));
          it = running_.erase(it);
        } else {
          out.emplace_back(*it, std::move(c));
          ++it;
        }
      }
    }
    for (auto& [seq, chunk] : out) Deliver(*seq, std::move(chunk));
    std::this_thread::sleep_for(opt_.step_time);
  }
}

std::optional<kvcache::CacheEventsPage> FakeBackend::CacheEvents(uint64_t epoch, uint64_t since, size_t max_events) {
  if (opt_.cache_events == nullptr) return std::nullopt;
  return opt_.cache_events->Since(epoch, since, max_events);
}

BackendStats FakeBackend::Stats() {
  std::lock_guard<std::mutex> lock(mu_);
  BackendStats s;
  engine::EngineStats& e = s.engine;
  e.num_running = static_cast<int32_t>(running_.size());
  e.num_waiting = static_cast<int32_t>(waiting_.size());
  e.block_size = static_cast<int32_t>(opt_.block_size);
  e.num_blocks_total = static_cast<int32_t>(opt_.num_blocks);
  e.num_blocks_used = static_cast<int32_t>(std::min(UsedBlocksLocked(), opt_.num_blocks));
  e.num_blocks_cached =
      static_cast<int32_t>(std::min<int64_t>(static_cast<int64_t>(prefix_blocks_.size()), e.num_blocks_total - e.num_blocks_used));
  e.num_blocks_free = e.num_blocks_total - e.num_blocks_used - e.num_blocks_cached;
  e.window = opt_.window;
  e.prefix_query_tokens = queried_tokens_;
  e.prefix_hit_tokens = hit_tokens_;
  std::error_code ec;
  if (!opt_.model_path.empty()) {
    const auto size = std::filesystem::file_size(opt_.model_path, ec);
    if (!ec) s.memory.weights_bytes = size;
  }
  s.memory.kv_pool_bytes = static_cast<uint64_t>(opt_.num_blocks * opt_.block_size) * 1024;
  s.memory.activation_bytes = uint64_t{1} << 20;
  e.max_admissible_tokens = static_cast<int64_t>(opt_.num_blocks - e.num_blocks_used) * opt_.block_size;
  s.max_admissible_context = std::min<int64_t>(opt_.max_context_length, e.max_admissible_tokens);
  return s;
}

void FakeBackend::Deliver(Seq& s, GenerationChunk chunk) {
  const bool last = chunk.finished();
  s.executor([cb = s.cb, chunk = std::move(chunk)]() mutable { cb(std::move(chunk)); });
  if (last) {
    s.cb = nullptr;
    s.executor = nullptr;
  }
}

void FakeBackend::Shutdown() {
  std::lock_guard<std::mutex> once(shutdown_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::vector<std::shared_ptr<Seq>> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& s : running_) left.push_back(std::move(s));
    for (auto& s : waiting_) left.push_back(std::move(s));
    running_.clear();
    waiting_.clear();
    ids_.clear();
  }
  for (auto& s : left) {
    GenerationChunk c;
    c.finish = engine::FinishReason::kCancelled;
    c.text_tail = std::move(s->utf8_pending);
    Deliver(*s, std::move(c));
  }
}

}  // namespace kvs::server

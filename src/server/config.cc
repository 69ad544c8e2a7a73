#include "server/config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "base/line_file.h"
#include "frontend/config_keys.h"
#include "template/chat_template.h"
#include "grammar/reasoning.h"

namespace kvs::server {

namespace {

using Keys = frontend::KeyTable<ServeConfig>;

constexpr std::string_view kHelpHint = "`kvserve serve --help` lists them";

std::string PowerOfTwo(int64_t x) { return (x & (x - 1)) == 0 ? "" : "must be a power of two"; }

std::string Sha256Check(const std::string& s) {
  if (s.empty()) return "";
  const bool hex = s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
  return hex ? "" : "\"\" or 64 hexadecimal digits";
}

std::string BuiltinTemplateNames() {
  std::string out;
  for (const std::string& n : tmpl::ChatTemplate::BuiltinNames()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string ReasoningParserCheck(const std::string& s) {
  if (s == "auto" || grammar::ReasoningFormatByName(s).ok()) return "";
  std::string names = "auto, none";
  for (const std::string& n : grammar::ReasoningFormatNames()) names += ", " + n;
  return "one of " + names + " (or a vLLM --reasoning-parser name such as deepseek_r1, qwen3, gpt_oss)";
}

std::string NonEmpty(const std::string& s) { return s.empty() ? "a non-empty string" : ""; }

const Keys& Table() {
  static const Keys table = [] {
    std::vector<Keys::Key> t;
    // server
    t.push_back(Keys::String("server.host", "host", [](ServeConfig& c) -> std::string& { return c.server.host; },
                             "an address or host name", "Address to listen on (0.0.0.0 for all interfaces)", NonEmpty));
    t.push_back(Keys::Int("server.port", "port", [](ServeConfig& c) -> int64_t& { return c.server.port; }, 0, 65535,
                          "TCP port; 0 picks a free one (the log says which)"));
    t.push_back(Keys::List("server.api_keys", "api-keys", [](ServeConfig& c) -> std::vector<std::string>& { return c.server.api_keys; },
                           "Accepted API keys (Authorization: Bearer KEY); none and no file: no authentication"));
    t.push_back(Keys::String("server.api_key_file", "api-key-file", [](ServeConfig& c) -> std::string& { return c.server.api_key_file; },
                             "a file path or \"\"", "File with one API key per line ('#' at the start of a line or after a space starts a comment), added to api_keys; re-read when it changes and on SIGHUP"));
    t.push_back(Keys::String("server.api_keys_env", "api-keys-env", [](ServeConfig& c) -> std::string& { return c.server.api_keys_env; },
                             "an environment variable name or \"\"", "Environment variable holding API keys (separated by commas or white space), added to api_keys (keeps them out of files and `ps`)"));
    t.push_back(Keys::Int("server.max_body_bytes", "max-body-bytes", [](ServeConfig& c) -> int64_t& { return c.server.max_body_bytes; },
                          1024, int64_t{1} << 30, "Largest request body; larger ones get 413"));
    t.push_back(Keys::Number("server.drain_timeout_seconds", "drain-timeout",
                             [](ServeConfig& c) -> double& { return c.server.drain_timeout_seconds; }, 0, false, 3600,
                             "On SIGTERM: how long in-flight requests may take to finish before they are cut"));
    t.push_back(Keys::Int("server.io_threads", "io-threads", [](ServeConfig& c) -> int64_t& { return c.server.io_threads; }, 1, 64,
                          "HTTP I/O threads shared by all connections"));
    t.push_back(Keys::Number("server.keep_alive_timeout_seconds", "keep-alive-timeout",
                             [](ServeConfig& c) -> double& { return c.server.keep_alive_timeout_seconds; }, 0.001, false, 3600,
                             "How long an idle keep-alive connection stays open"));
    t.push_back(Keys::Int("server.prep_threads", "prep-threads", [](ServeConfig& c) -> int64_t& { return c.server.prep_threads; },
                          1, 64, "Threads that prepare requests (parse JSON, render chat templates, tokenize) off the I/O threads"));
    t.push_back(Keys::Int("server.prep_queue", "prep-queue", [](ServeConfig& c) -> int64_t& { return c.server.prep_queue; }, 0,
                          1 << 20, "Requests that may wait for a prep thread; beyond it requests get 503 with Retry-After"));
    t.push_back(Keys::Number("server.header_timeout_seconds", "header-timeout",
                             [](ServeConfig& c) -> double& { return c.server.header_timeout_seconds; }, 0.001, false, 3600,
                             "From a request's first byte to its complete header; a slower client is disconnected"));
    t.push_back(Keys::Int("server.max_connections", "max-connections",
                          [](ServeConfig& c) -> int64_t& { return c.server.max_connections; }, 0, 1 << 20,
                          "Open connections; a new one beyond gets 503 with Retry-After and is closed; 0: no limit"));
    t.push_back(Keys::Int("server.max_connections_per_client", "max-connections-per-client",
                          [](ServeConfig& c) -> int64_t& { return c.server.max_connections_per_client; }, 0, 1 << 20,
                          "Open connections from one client address; beyond it 429 with Retry-After; 0: no limit"));
    t.push_back(Keys::String("server.tls_cert_file", "tls-cert-file", [](ServeConfig& c) -> std::string& { return c.server.tls_cert_file; },
                             "a file path or \"\"",
                             "HTTPS: PEM certificate chain (leaf first), with tls_key_file; reloaded on SIGHUP; \"\": plain HTTP"));
    t.push_back(Keys::String("server.tls_key_file", "tls-key-file", [](ServeConfig& c) -> std::string& { return c.server.tls_key_file; },
                             "a file path or \"\"", "The PEM private key of tls_cert_file"));
    // model
    t.push_back(Keys::String("model.path", "model", [](ServeConfig& c) -> std::string& { return c.model.path; },
                             "a GGUF file path", "The model to serve (required)"));
    t.push_back(Keys::String("model.name", "served-model-name", [](ServeConfig& c) -> std::string& { return c.model.name; },
                             "a string; \"\": the file name without .gguf", "Model id clients send and /v1/models lists"));
    t.push_back(Keys::Enum("model.dtype", "dtype", [](ServeConfig& c) -> std::string& { return c.model.dtype; },
                           {"auto", "f32", "f16", "bf16"},
                           "auto: F16 weight matrices converted to BF16 at load on CPUs with AVX512_BF16 (bf16 dot "
                           "products, twice the f32 rate; as vLLM on CPU), else as stored; bf16: F32 and F16 matrices "
                           "converted; f32, f16: weights as stored, float matrices multiplied exactly in f32"));
    t.push_back(Keys::Int("model.max_context_length", "max-context-length",
                          [](ServeConfig& c) -> int64_t& { return c.model.max_context_length; }, 16, int64_t{1} << 24,
                          "Most tokens (prompt + output) of one request; capped at the model's trained context"));
    t.push_back(Keys::String("model.sha256", "sha256", [](ServeConfig& c) -> std::string& { return c.model.sha256; },
                             "\"\" or 64 hex digits", "Expected SHA-256 of the weights file; start-up fails on a mismatch",
                             Sha256Check));
    t.push_back(Keys::String("model.chat_template", "chat-template",
                             [](ServeConfig& c) -> std::string& { return c.model.chat_template; },
                             "\"\", a built-in name (" + BuiltinTemplateNames() + ") or a .jinja file path",
                             "Replaces the model's chat template (GGUF tokenizer.chat_template); probed at load like "
                             "the model's own: a file that cannot be read or a template that does not parse stops "
                             "the start-up"));
    t.push_back(Keys::String("model.reasoning_parser", "reasoning-parser",
                             [](ServeConfig& c) -> std::string& { return c.model.reasoning_parser; },
                             "auto, none or a format name",
                             "How chat replies are split into reasoning_content and content: auto (the format the chat "
                             "template writes: think, seed_oss, minimax, mistral, command, gemma4, harmony), none (all "
                             "content, as vLLM without --reasoning-parser), or a format name",
                             ReasoningParserCheck));
    // kv_cache
    t.push_back(Keys::Number("kv_cache.memory_fraction", "memory-fraction",
                             [](ServeConfig& c) -> double& { return c.kv_cache.memory_fraction; }, 0, true, 1,
                             "Part of the memory limit for weights, KV pool and activations; the KV pool gets the rest"));
    t.push_back(Keys::Int("kv_cache.memory_limit_bytes", "memory-limit",
                          [](ServeConfig& c) -> int64_t& { return c.kv_cache.memory_limit_bytes; }, 0, int64_t{1} << 50,
                          "Memory that memory_fraction applies to, in bytes; 0: the machine's RAM"));
    t.push_back(Keys::Int("kv_cache.block_size", "block-size", [](ServeConfig& c) -> int64_t& { return c.kv_cache.block_size; }, 1, 256,
                          "Tokens per KV block", PowerOfTwo, "a power of two in [1, 256]"));
    t.push_back(Keys::Enum("kv_cache.dtype", "kv-dtype", [](ServeConfig& c) -> std::string& { return c.kv_cache.dtype; },
                           {"f16", "bf16", "f32", "q8_0", "q4_0", "q4_1"}, "Element type of the KV cache"));
    t.push_back(Keys::Bool("kv_cache.prefix_caching", "prefix-caching",
                           [](ServeConfig& c) -> bool& { return c.kv_cache.prefix_caching; },
                           "Reuse the KV of shared prompt prefixes between requests"));
    t.push_back(Keys::String("kv_cache.warm_prompts_file", "warm-prompts",
                             [](ServeConfig& c) -> std::string& { return c.kv_cache.warm_prompts_file; },
                             "\"\" or a file path",
                             "Prompts prefilled into the prefix cache at start, before /ready (one per line: text, or a "
                             "JSON object {\"prompt\": ...} or {\"messages\": [...]}); needs prefix_caching"));
    t.push_back(Keys::String("kv_cache.disk.path", "kv-disk-path",
                             [](ServeConfig& c) -> std::string& { return c.kv_cache.disk_path; }, "\"\" or a directory",
                             "Second tier of the prefix cache: every block the prefix cache publishes is also written "
                             "here (asynchronously, checksummed), a prefix found here is restored instead of "
                             "recomputed, and it survives a restart; \"\": none. Needs prefix_caching"));
    t.push_back(Keys::Int("kv_cache.disk.max_bytes", "kv-disk-max-bytes",
                          [](ServeConfig& c) -> int64_t& { return c.kv_cache.disk_max_bytes; }, 1 << 20, int64_t{1} << 50,
                          "Bound on the disk tier's files in bytes; the least recently used blocks go first"));
    // runtime
    t.push_back(Keys::String("runtime.device", "device", [](ServeConfig& c) -> std::string& { return c.runtime.device; },
                             "a device this build runs on: cpu", "Which runner computes the model; another is refused at start-up",
                             NonEmpty));
    t.push_back(Keys::Int("runtime.threads", "threads", [](ServeConfig& c) -> int64_t& { return c.runtime.threads; }, 0, 1024,
                          "Compute threads; 0: one per core"));
    t.push_back(Keys::Int("runtime.tensor_parallel", "tensor-parallel",
                          [](ServeConfig& c) -> int64_t& { return c.runtime.tensor_parallel; }, 1, 64,
                          "Processes that share the model's heads and FFN (Megatron-style), started together by "
                          "`mpirun -np N kvserve serve --tensor-parallel N`; rank 0 serves HTTP (docs/parallel.md)"));
    t.push_back(Keys::Int("runtime.pipeline_parallel", "pipeline-parallel",
                          [](ServeConfig& c) -> int64_t& { return c.runtime.pipeline_parallel; }, 1, 64,
                          "Pipeline stages, each a contiguous range of layers on its own tensor_parallel processes "
                          "(mpirun starts tensor_parallel x pipeline_parallel); a step's sequences go through in "
                          "micro-batches so that the stages overlap (docs/parallel.md)"));
    t.push_back(Keys::Int("runtime.max_batch_size", "max-batch-size", [](ServeConfig& c) -> int64_t& { return c.runtime.max_batch_size; },
                          1, 4096, "Sequences running at once"));
    t.push_back(Keys::Int("runtime.max_num_batched_tokens", "max-num-batched-tokens",
                          [](ServeConfig& c) -> int64_t& { return c.runtime.max_num_batched_tokens; }, 1, int64_t{1} << 20,
                          "Tokens computed per engine step (long prompts are prefilled in chunks of this)"));
    t.push_back(Keys::Int("runtime.max_prefill_tokens_while_decoding", "max-prefill-tokens-while-decoding",
                          [](ServeConfig& c) -> int64_t& { return c.runtime.max_prefill_tokens_while_decoding; }, 0,
                          int64_t{1} << 20,
                          "Prefill tokens a step may carry while other sequences decode (their inter-token latency "
                          "against long prompts' time to first token); 0: no cap beyond max_num_batched_tokens"));
    t.push_back(Keys::Int("runtime.max_concurrent_requests", "max-concurrent-requests",
                          [](ServeConfig& c) -> int64_t& { return c.runtime.max_concurrent_requests; }, 1, int64_t{1} << 20,
                          "Sequences admitted (running + queued); beyond it requests get 429 with Retry-After"));
    t.push_back(Keys::Number("runtime.request_timeout_seconds", "request-timeout",
                             [](ServeConfig& c) -> double& { return c.runtime.request_timeout_seconds; }, 0, false, 86400,
                             "A request running longer is cut with 504 (or an error event); 0: no limit"));
    t.push_back(Keys::Enum("runtime.scheduling_policy", "scheduling-policy",
                           [](ServeConfig& c) -> std::string& { return c.runtime.scheduling_policy; }, {"fcfs", "priority"},
                           "Order of admission: arrival, or the request's priority field (lower first; may preempt)"));
    t.push_back(Keys::Number("runtime.output_reservation", "output-reservation",
                             [](ServeConfig& c) -> double& { return c.runtime.output_reservation; }, 0, false, 1,
                             "Admission: share of a request's max_tokens whose KV must also be free (0: prompt only, "
                             "growth by preemption; 1: the whole predicted peak, never preempted)"));
    // speculative
    t.push_back(Keys::Enum("speculative.method", "speculative",
                           [](ServeConfig& c) -> std::string& { return c.speculative.method; }, {"off", "ngram", "draft"},
                           "Speculative decoding: off; ngram (prompt lookup: draft tokens are what followed the "
                           "latest earlier occurrence of the text's last words); or draft (a smaller model of the same "
                           "vocabulary, speculative.draft_model, proposes them). Drafts are verified in one forward "
                           "pass; greedy output is unchanged, sampled output keeps its distribution"));
    t.push_back(Keys::String("speculative.draft_model", "model-draft",
                             [](ServeConfig& c) -> std::string& { return c.speculative.draft_model; },
                             "a GGUF file or \"\"",
                             "speculative.method draft: the draft model, a smaller model with the same vocabulary "
                             "(its KV takes a share of the pool)"));
    t.push_back(Keys::String("speculative.draft_model_sha256", "model-draft-sha256",
                             [](ServeConfig& c) -> std::string& { return c.speculative.draft_model_sha256; },
                             "\"\" or 64 hex digits",
                             "Expected SHA-256 of the draft model's file; start-up fails on a mismatch", Sha256Check));
    t.push_back(Keys::Int("speculative.num_tokens", "speculative-tokens",
                          [](ServeConfig& c) -> int64_t& { return c.speculative.num_tokens; }, 1, 64,
                          "Most draft tokens per sequence and step (each sequence adapts below it)"));
    t.push_back(Keys::Int("speculative.ngram_min", "speculative-ngram-min",
                          [](ServeConfig& c) -> int64_t& { return c.speculative.ngram_min; }, 1, 64,
                          "Shortest run of last tokens looked up for drafts"));
    t.push_back(Keys::Int("speculative.ngram_max", "speculative-ngram-max",
                          [](ServeConfig& c) -> int64_t& { return c.speculative.ngram_max; }, 1, 64,
                          "Longest run of last tokens looked up for drafts (tried first)"));
    // logging
    t.push_back(Keys::Enum("logging.level", "log-level", [](ServeConfig& c) -> std::string& { return c.logging.level; },
                           {"trace", "debug", "info", "warn", "error", "off"}, "Log level (stderr)"));
    t.push_back(Keys::String("logging.access_log", "access-log", [](ServeConfig& c) -> std::string& { return c.logging.access_log; },
                             "stdout, stderr, off, or a file path", "Where the JSON access log goes (one line per request)",
                             NonEmpty));
    return Keys(std::move(t));
  }();
  return table;
}

}  // namespace

const std::vector<ConfigKeyInfo>& ConfigKeys() {
  static const std::vector<ConfigKeyInfo> keys = Table().Infos(ServeConfig{});
  return keys;
}

Status LoadConfigYaml(std::string_view yaml, ServeConfig* cfg) {
  KVS_ASSIGN_OR_RETURN(const YAML::Node root, frontend::ParseYaml(yaml));
  if (root.IsNull()) return Status::Ok();  // an empty file: all defaults
  if (!root.IsMap()) return InvalidArgument("the configuration must be a mapping of sections (server, model, ...)");
  static const std::vector<std::string> kSections = {"server", "model", "kv_cache", "runtime", "speculative", "logging"};
  std::set<std::string> seen_sections;
  for (const auto& sec : root) {
    const std::string section = sec.first.Scalar();
    if (std::find(kSections.begin(), kSections.end(), section) == kSections.end()) {
      return InvalidArgument("unknown section \"{}\"{}; sections are server, model, kv_cache, runtime, speculative, logging",
                             section, Table().Suggest(section));
    }
    if (!seen_sections.insert(section).second) return InvalidArgument("section \"{}\" appears twice", section);
    KVS_RETURN_IF_ERROR(Table().LoadSection(section, sec.second, cfg));
  }
  return Status::Ok();
}

Status LoadConfigFile(const std::string& path, ServeConfig* cfg) {
  KVS_ASSIGN_OR_RETURN(const std::string text, frontend::ReadConfigFile(path));
  return LoadConfigYaml(text, cfg).WithContext(path);
}

Status SetConfigValue(std::string_view key, std::string_view value, ServeConfig* cfg) {
  return Table().SetOption(cfg, key, value, kHelpHint);
}

void AddConfigOptions(CLI::App* app, ConfigOverrides* out) {
  const ServeConfig defaults;
  for (const Keys::Key& d : Table().keys()) {
    std::string names = "--" + d.name;
    if (!d.alias.empty()) names += ",--" + d.alias;
    if (d.name == "model.path") names += ",-m";
    CLI::Option* o = app->add_option(names);
    o->description(fmt::format("{} ({}; default {})", d.help, d.allowed, d.get(defaults).dump()));
    o->type_name("VALUE");
    // Every occurrence, in order: a later one wins when applied.
    o->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    o->each([out, key = d.name](const std::string& v) { out->emplace_back(key, v); });
  }
}

Status CheckExtraArguments(const std::vector<std::string>& extras) {
  if (extras.empty()) return Status::Ok();
  const std::string& a = extras.front();
  if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
    const std::string name = a.substr(2, a.find('=') == std::string::npos ? std::string::npos : a.find('=') - 2);
    return Table().UnknownOption(name, kHelpHint);
  }
  return InvalidArgument("unexpected argument \"{}\"; overrides look like --server.port 8001", a);
}

Status ApplyConfigOverrides(const ConfigOverrides& overrides, ServeConfig* cfg) {
  for (const auto& [key, value] : overrides) KVS_RETURN_IF_ERROR(SetConfigValue(key, value, cfg));
  return Status::Ok();
}

Status ApplyOverrides(const std::vector<std::string>& args, ServeConfig* cfg) {
  CLI::App app;
  ConfigOverrides overrides;
  AddConfigOptions(&app, &overrides);
  app.allow_extras();
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
  } catch (const CLI::ArgumentMismatch& e) {
    // Name the option as it was typed: the one followed by no value.
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (a.size() > 1 && a[0] == '-' && a.find('=') == std::string::npos &&
          (i + 1 == args.size() || args[i + 1].compare(0, 2, "--") == 0)) {
        return InvalidArgument("option {} needs a value", a);
      }
    }
    return InvalidArgument("{}", e.what());
  } catch (const CLI::ParseError& e) {
    return InvalidArgument("{}", e.what());
  }
  KVS_RETURN_IF_ERROR(CheckExtraArguments(app.remaining()));
  return ApplyConfigOverrides(overrides, cfg);
}

Status ValidateConfig(const ServeConfig& cfg) {
  if (cfg.server.tls_cert_file.empty() != cfg.server.tls_key_file.empty()) {
    return InvalidArgument("{}: HTTPS needs both server.tls_cert_file and server.tls_key_file",
                           cfg.server.tls_cert_file.empty() ? "server.tls_cert_file" : "server.tls_key_file");
  }
  if (cfg.runtime.max_num_batched_tokens < cfg.runtime.max_batch_size) {
    return InvalidArgument(
        "runtime.max_num_batched_tokens ({}) must be at least runtime.max_batch_size ({}): every running sequence "
        "computes one token per step",
        cfg.runtime.max_num_batched_tokens, cfg.runtime.max_batch_size);
  }
  if (!cfg.kv_cache.disk_path.empty() && !cfg.kv_cache.prefix_caching) {
    return InvalidArgument("kv_cache.disk.path needs kv_cache.prefix_caching: true (the disk tier keeps the prefix cache's blocks)");
  }
  if (cfg.speculative.ngram_min > cfg.speculative.ngram_max) {
    return InvalidArgument("speculative.ngram_min ({}) must not exceed speculative.ngram_max ({})",
                           cfg.speculative.ngram_min, cfg.speculative.ngram_max);
  }
  if (cfg.speculative.method == "draft" && cfg.speculative.draft_model.empty()) {
    return InvalidArgument("speculative.method draft needs speculative.draft_model (--model-draft FILE)");
  }
  if (cfg.speculative.method != "draft" && !cfg.speculative.draft_model.empty()) {
    return InvalidArgument("speculative.draft_model is set but speculative.method is {}; set it to draft",
                           cfg.speculative.method);
  }
  if (!cfg.speculative.draft_model_sha256.empty() && cfg.speculative.draft_model.empty()) {
    return InvalidArgument("speculative.draft_model_sha256 is set but speculative.draft_model is not");
  }
  if (!cfg.speculative.draft_model.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(cfg.speculative.draft_model, ec)) {
      return InvalidArgument("speculative.draft_model: {} is not a file", cfg.speculative.draft_model);
    }
  }
  if (!cfg.kv_cache.warm_prompts_file.empty() && !cfg.kv_cache.prefix_caching) {
    return InvalidArgument("kv_cache.warm_prompts_file needs kv_cache.prefix_caching: true (warming fills the prefix cache)");
  }
  if (const std::string& t = cfg.model.chat_template; !t.empty()) {
    const auto& builtins = tmpl::ChatTemplate::BuiltinNames();
    if (std::find(builtins.begin(), builtins.end(), t) == builtins.end()) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(t, ec) || !std::ifstream(t).good()) {
        return InvalidArgument("model.chat_template: {} is neither a built-in template ({}) nor a readable file", t,
                               BuiltinTemplateNames());
      }
    }
  }
  if (cfg.model.max_context_length < cfg.kv_cache.block_size) {
    return InvalidArgument("model.max_context_length ({}) must be at least kv_cache.block_size ({})",
                           cfg.model.max_context_length, cfg.kv_cache.block_size);
  }
  return Status::Ok();
}

Status LoadServeConfig(const std::string& config_path, const ConfigOverrides& overrides, ServeConfig* cfg) {
  if (!config_path.empty()) KVS_RETURN_IF_ERROR(LoadConfigFile(config_path, cfg));
  KVS_RETURN_IF_ERROR(ApplyConfigOverrides(overrides, cfg));
  return ValidateConfig(*cfg);
}

StatusOr<std::vector<std::string>> LoadApiKeys(const ServeConfig& cfg) {
  std::vector<std::string> keys = cfg.server.api_keys;
  if (!cfg.server.api_key_file.empty()) {
    auto from_file = ReadApiKeyFile(cfg.server.api_key_file);
    if (!from_file.ok()) return from_file.status().WithContext("server.api_key_file");
    keys.insert(keys.end(), from_file->begin(), from_file->end());
  }
  if (!cfg.server.api_keys_env.empty()) {
    const char* v = std::getenv(cfg.server.api_keys_env.c_str());
    if (!v) return NotFound("server.api_keys_env: the environment variable {} is not set", cfg.server.api_keys_env);
    size_t from_env = 0;
    std::string_view rest(v);
    while (!rest.empty()) {
      const size_t b = rest.find_first_not_of(", \t\r\n");
      if (b == std::string_view::npos) break;
      rest.remove_prefix(b);
      const size_t e = std::min(rest.find_first_of(", \t\r\n"), rest.size());
      keys.emplace_back(rest.substr(0, e));
      rest.remove_prefix(e);
      ++from_env;
    }
    if (from_env == 0) return InvalidArgument("server.api_keys_env: {} holds no key", cfg.server.api_keys_env);
  }
  return keys;
}

nlohmann::json ConfigToJson(const ServeConfig& cfg) {
  nlohmann::json j = Table().ToJson(cfg);
  j["server"]["api_keys"] = fmt::format("<{} keys>", cfg.server.api_keys.size());
  return j;
}

std::string ConfigHelp() {
  return frontend::KeyHelp("Configuration keys (YAML sections; override any with --section.key VALUE or its alias):",
                           ConfigKeys());
}

}  // namespace kvs::server

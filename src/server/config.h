// ServeConfig: everything `kvserve serve` can be told, from one YAML file
// (sections server, model, kv_cache, runtime, speculative, logging) and from command-line
// overrides of any key ("--server.port 8001", "--server.port=8001", or an
// alias such as "--port 8001"), each registered as a CLI11 option
// (AddConfigOptions).
//
// Precedence: built-in defaults < YAML file < command line. Every key is
// declared once in a table (config.cc, a frontend::KeyTable) with its type,
// allowed range, default and help; loading, overriding, --help and configs/default.yaml all follow
// that table. An unknown key, a value of the wrong type (a quoted "8000" for
// an integer, a list for a string, ...) or a value out of range is an
// InvalidArgument naming the key and what it accepts; the server refuses to
// start on it.
// Thread-safety: plain values; the functions are pure apart from reading files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "frontend/key_info.h"

namespace CLI {
class App;
}  // namespace CLI

namespace kvs::server {

struct ServerSection {
  std::string host = "127.0.0.1";
  int64_t port = 8000;                      // 0: any free port (printed at start-up)
  std::vector<std::string> api_keys;        // empty (and no file): no authentication
  std::string api_key_file;                 // one key per line, '#' comments
  std::string api_keys_env;                 // environment variable with keys (comma or space separated)
  int64_t max_body_bytes = int64_t{32} << 20;
  double drain_timeout_seconds = 30;        // SIGTERM: time in-flight requests get to finish
  int64_t io_threads = 2;                   // HTTP threads (all connections share them)
  double keep_alive_timeout_seconds = 60;   // idle time before a keep-alive connection closes
  int64_t prep_threads = 2;                 // request preparation (parse, template, tokenize) threads
  int64_t prep_queue = 64;                  // requests waiting for a prep thread; more get 503
  double header_timeout_seconds = 30;       // a request's first byte to its complete header (slowloris)
  int64_t max_connections = 4096;           // open connections; beyond: 503 and closed; 0: no limit
  int64_t max_connections_per_client = 0;   // open connections from one address; beyond: 429; 0: no limit
  std::string tls_cert_file;                // HTTPS: PEM certificate chain (with tls_key_file); "": HTTP
  std::string tls_key_file;                 // its PEM private key; both reloaded on SIGHUP
};

struct ModelSection {
  std::string path;                 // GGUF file
  std::string name;                 // served model id; "": the file name without .gguf
  std::string dtype = "auto";       // compute dtype: auto, f32, f16, bf16
  int64_t max_context_length = 32768;  // prompt + output tokens; capped at the model's own
  std::string sha256;               // "": not checked; else the file must hash to it
  std::string chat_template;        // "": the model's; else a built-in name (chatml, ...) or a .jinja file
  // Reasoning section parser (grammar/reasoning.h): auto (from the chat
  // template), none, or a format name / vLLM alias.
  std::string reasoning_parser = "auto";
};

struct KvCacheSection {
  double memory_fraction = 0.45;    // of the memory limit for weights + KV + activations
  int64_t memory_limit_bytes = 0;   // the memory the fraction applies to; 0: the machine's RAM
  int64_t block_size = 16;          // tokens per KV block (a power of two)
  std::string dtype = "f16";        // f32, f16, bf16, q8_0
  bool prefix_caching = true;
  std::string warm_prompts_file;    // "": none; else prompts prefilled into the prefix cache before ready (warm.h)
  // The disk tier of the prefix cache (kvcache/disk_store.h): "" none.
  std::string disk_path;
  int64_t disk_max_bytes = int64_t{8} << 30;
};

struct RuntimeSection {
  std::string device = "cpu";       // which runner computes (backend::RunnerFactories(): cpu in this build)
  int64_t threads = 0;              // compute threads; 0: all cores
  int64_t tensor_parallel = 1;      // ranks sharing each layer under mpirun (backend/tensor_parallel.h)
  int64_t pipeline_parallel = 1;    // stages of contiguous layers; mpirun starts tensor x pipeline ranks
  int64_t max_batch_size = 32;      // sequences running at once
  int64_t max_num_batched_tokens = 2048;  // tokens per engine step (prefill chunking)
  int64_t max_prefill_tokens_while_decoding = 0;  // prefill tokens of a step in which others decode; 0: no cap
  int64_t max_concurrent_requests = 64;   // running + queued sequences; more get 429
  double request_timeout_seconds = 120;   // 0: no timeout
  double output_reservation = 0.0;  // share of max_tokens whose KV must be free to admit a request
  std::string scheduling_policy = "fcfs";  // fcfs, or priority (the request's `priority`, lower first)
};

// Speculative decoding (engine/speculative.h).
struct SpeculativeSection {
  std::string method = "off";   // off, ngram (prompt lookup: drafts from the sequence's own text), draft (a draft model)
  std::string draft_model;      // method draft: GGUF file of a smaller model with the same vocabulary
  std::string draft_model_sha256;  // its expected SHA-256 ("": not checked)
  int64_t num_tokens = 5;       // most draft tokens per sequence and step
  int64_t ngram_min = 2;        // shortest suffix looked up
  int64_t ngram_max = 4;        // longest suffix looked up (tried first)
};

struct LoggingSection {
  std::string level = "info";          // trace, debug, info, warn, error, off
  std::string access_log = "stdout";   // stdout, stderr, off, or a file path (appended)
};

struct ServeConfig {
  ServerSection server;
  ModelSection model;
  KvCacheSection kv_cache;
  RuntimeSection runtime;
  SpeculativeSection speculative;
  LoggingSection logging;
};

// One documented key: "server.port", its alias ("--port"), type, allowed
// values and default, as shown by --help and in configs/default.yaml.
using ConfigKeyInfo = frontend::KeyInfo;
const std::vector<ConfigKeyInfo>& ConfigKeys();

// Reads a YAML file / text over *cfg. Keys absent keep their value; a key
// with an empty (null) value keeps its default.
Status LoadConfigFile(const std::string& path, ServeConfig* cfg);
Status LoadConfigYaml(std::string_view yaml, ServeConfig* cfg);

// (key, value) pairs in command-line order; lists as comma-separated values.
using ConfigOverrides = std::vector<std::pair<std::string, std::string>>;

// Registers every key as an option of `app`: "--server.port", its alias
// "--port" ("-m" too for model.path). Each occurrence appends (key, value)
// to *out when the app is parsed; *out must outlive the app's parse.
void AddConfigOptions(CLI::App* app, ConfigOverrides* out);
// InvalidArgument for what the options above left over: an unknown option
// (with a suggestion) or a stray argument.
Status CheckExtraArguments(const std::vector<std::string>& extras);
// Sets each pair in order (a later one wins).
Status ApplyConfigOverrides(const ConfigOverrides& overrides, ServeConfig* cfg);
// Parses command-line arguments with the options above, then applies them.
Status ApplyOverrides(const std::vector<std::string>& args, ServeConfig* cfg);
// One override by its full key ("runtime.threads") or alias ("threads").
Status SetConfigValue(std::string_view key, std::string_view value, ServeConfig* cfg);

// Checks between keys (each key's own range is checked when it is set).
Status ValidateConfig(const ServeConfig& cfg);

// The whole configuration of `kvserve serve`: defaults, then the YAML file
// (when config_path is not ""), then the overrides, then ValidateConfig.
Status LoadServeConfig(const std::string& config_path, const ConfigOverrides& overrides, ServeConfig* cfg);

// api_keys plus those of api_key_file (read now). Empty: no authentication.
StatusOr<std::vector<std::string>> LoadApiKeys(const ServeConfig& cfg);

// The effective configuration, API keys redacted (logged at start-up).
nlohmann::json ConfigToJson(const ServeConfig& cfg);
// A table of every key for `kvserve serve --help`.
std::string ConfigHelp();

}  // namespace kvs::server

// kvserve_fake: `kvserve serve` over FakeBackend (fake_backend.h), for the
// integration tests in tests/server: no weights, deterministic output. A
// test-only binary; the kvserve binary never links the fake.
//   kvserve_fake [serve] [--fake-step-ms MS] [--fake-load-seconds S]
//                [--fake-kv-blocks N] [--fake-reasoning] [--config FILE] [--section.key VALUE]...
// --fake-reasoning: a reasoning model's template and scripted thinking
// (fake_backend.h); model.reasoning_parser applies as to a real model.
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include <CLI/CLI.hpp>

#include "server/config.h"
#include "server/testing/fake_backend.h"
#include "server/serve.h"

int main(int argc, char** argv) {
  using namespace kvs;
  CLI::App app{"kvserve serve over a fake backend (tests only)"};
  std::string config;
  double step_ms = 2, load_seconds = 0;
  int64_t kv_blocks = 4096;
  bool reasoning = false;
  app.add_option("-c,--config", config);
  app.add_option("--fake-step-ms", step_ms);
  app.add_option("--fake-load-seconds", load_seconds);
  app.add_option("--fake-kv-blocks", kv_blocks);
  app.add_flag("--fake-reasoning", reasoning);
  server::ConfigOverrides overrides;
  server::AddConfigOptions(&app, &overrides);
  app.allow_extras();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest.front() == "serve") rest.erase(rest.begin());
  server::ServeConfig cfg;
  Status s = server::CheckExtraArguments(rest);
  if (s.ok()) s = server::LoadServeConfig(config, overrides, &cfg);
  if (!s.ok()) {
    std::fprintf(stderr, "kvserve serve: %s\n", s.message().c_str());
    return 2;
  }
  auto factory = [&](const server::ServeConfig& c) -> StatusOr<std::unique_ptr<server::InferenceBackend>> {
    if (load_seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(load_seconds));
    server::FakeBackendOptions o;
    o.model_name = c.model.name.empty() && c.model.path.empty() ? "fake-model" : server::ServedModelName(c);
    o.model_path = c.model.path;
    o.max_context_length = c.model.max_context_length;
    o.max_batch_size = c.runtime.max_batch_size;
    o.block_size = c.kv_cache.block_size;
    o.prefix_caching = c.kv_cache.prefix_caching;
    o.num_blocks = kv_blocks;
    o.step_time = std::chrono::microseconds(static_cast<int64_t>(step_ms * 1000));
    o.reasoning_template = reasoning;
    if (reasoning) {
      KVS_ASSIGN_OR_RETURN(o.reasoning_format, grammar::ReasoningFormatByName(
                                                   c.model.reasoning_parser == "auto" ? "think" : c.model.reasoning_parser));
    }
    return std::unique_ptr<server::InferenceBackend>(std::make_unique<server::FakeBackend>(o));
  };
  server::ServeOptions opts;
  opts.require_model_file = false;
  return server::RunServe(cfg, factory, opts);
}

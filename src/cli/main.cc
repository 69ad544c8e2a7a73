// kvserve: one binary, many subcommands (run, serve, inspect, bench, ...).
#include <algorithm>
#include <cstdio>
#include <map>

#include "cli/command.h"

namespace kvs::cli {
std::vector<Command>& Registry() {
  static std::vector<Command> commands;
  return commands;
}
}  // namespace kvs::cli

int main(int argc, char** argv) {
  using kvs::cli::Registry;
  CLI::App app{"kvserve: a long-context LLM inference server"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kvserve 0.1.0");
  std::sort(Registry().begin(), Registry().end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::map<CLI::App*, std::function<int()>> runners;
  std::vector<std::pair<CLI::App*, const kvs::cli::Command*>> subs;
  for (const auto& c : Registry()) subs.emplace_back(app.add_subcommand(c.name, c.help), &c);
  for (auto& [sub, c] : subs) runners[sub] = c->setup(sub);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help and version exit 0; a usage error exits 2, as bad configuration does.
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (auto& [sub, run] : runners) {
    if (sub->parsed()) return run();
  }
  std::fprintf(stderr, "no subcommand given\n");
  return 2;
}

// Subcommand registry for the one `kvserve` binary. Each cmd_*.cc file
// registers itself with a static Registrar; main() builds the CLI11 app.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace kvs::cli {

struct Command {
  std::string name;
  std::string help;
  // Adds options to `sub` and returns the function to run when it is chosen.
  // The returned function gives the process exit code.
  std::function<std::function<int()>(CLI::App* sub)> setup;
};

std::vector<Command>& Registry();

struct Registrar {
  explicit Registrar(Command c) { Registry().push_back(std::move(c)); }
};

}  // namespace kvs::cli

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

// --dtype for the commands that load a model (run, bench, perplexity), with
// serve's model.dtype values and meaning (model::LoadOptions::ForDtype).
inline CLI::Option* AddDtypeOption(CLI::App* app, std::string* dtype) {
  return app
      ->add_option("--dtype", *dtype,
                   "auto (F16 matrices to BF16 on CPUs with AVX512_BF16), bf16 (F32 and F16 matrices to BF16), "
                   "f32 or f16 (as stored); as serve's --dtype")
      ->check(CLI::IsMember({"auto", "f32", "f16", "bf16"}));
}

}  // namespace kvs::cli

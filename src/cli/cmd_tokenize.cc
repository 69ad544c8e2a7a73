// `kvserve tokenize`: encode text (stdin, or --text) with a model's
// tokenizer and print the ids, or the pieces. stdin is taken byte for byte,
// including a final newline if there is one (use `printf`, not `echo`, for
// exact input).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include "cli/command.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace kvs::cli {
namespace {

struct TokenizeArgs {
  std::string model;
  std::string hf_tokenizer;
  std::string hf_config;
  std::string text;
  bool have_text = false;
  bool ids = false;
  bool pieces = false;
  bool parse_special = false;
  bool add_special = false;
};

bool ReadFile(const std::string& path, std::string* out) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out->append(buf, n);
  std::fclose(f);
  return true;
}

// Printable form of a piece: control bytes and '\\' escaped.
std::string Escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7F) { char b[8]; std::snprintf(b, sizeof(b), "\\x%02x", c); out += b; }
    else out.push_back(static_cast<char>(c));
  }
  return out;
}

int RunTokenize(const TokenizeArgs& a) {
  std::unique_ptr<tok::Tokenizer> tokenizer;
  std::unique_ptr<gguf::GgufFile> file;
  if (!a.model.empty()) {
    auto f = gguf::GgufFile::Open(a.model);
    if (!f.ok()) {
      std::fprintf(stderr, "error: %s\n", f.status().ToString().c_str());
      return 1;
    }
    file = std::move(f).value();
    auto t = tok::Tokenizer::FromGguf(*file);
    if (!t.ok()) {
      std::fprintf(stderr, "error: %s: %s\n", a.model.c_str(), t.status().ToString().c_str());
      return 1;
    }
    tokenizer = std::move(t).value();
  } else if (!a.hf_tokenizer.empty()) {
    std::string json, config;
    if (!ReadFile(a.hf_tokenizer, &json)) {
      std::fprintf(stderr, "error: cannot read %s\n", a.hf_tokenizer.c_str());
      return 1;
    }
    if (!a.hf_config.empty() && !ReadFile(a.hf_config, &config)) {
      std::fprintf(stderr, "error: cannot read %s\n", a.hf_config.c_str());
      return 1;
    }
    auto t = tok::Tokenizer::FromHuggingFace(json, config);
    if (!t.ok()) {
      std::fprintf(stderr, "error: %s: %s\n", a.hf_tokenizer.c_str(), t.status().ToString().c_str());
      return 1;
    }
    tokenizer = std::move(t).value();
  } else {
    std::fprintf(stderr, "error: give -m FILE.gguf or --hf-tokenizer tokenizer.json\n");
    return 2;
  }

  std::string text = a.text;
  if (!a.have_text) {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  const std::vector<int32_t> ids = tokenizer->Encode(text, a.add_special, a.parse_special);
  if (a.pieces) {
    for (int32_t id : ids) {
      std::printf("%d\t%s\t'%s'\n", id, Escape(tokenizer->TokenText(id)).c_str(),
                  Escape(tokenizer->TokenPiece(id)).c_str());
    }
  }
  if (a.ids || !a.pieces) {
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) line.push_back(' ');
      line += std::to_string(ids[i]);
    }
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

const Registrar kRegister_tokenize(Command{
    "tokenize", "Print the token ids (or pieces) of text read from stdin",
    [](CLI::App* sub) -> std::function<int()> {
      auto a = std::make_shared<TokenizeArgs>();
      sub->add_option("-m,--model", a->model, "GGUF file whose tokenizer to use");
      sub->add_option("--hf-tokenizer", a->hf_tokenizer, "Hugging Face tokenizer.json (instead of -m)");
      sub->add_option("--hf-config", a->hf_config, "Hugging Face tokenizer_config.json (with --hf-tokenizer)");
      sub->add_option_function<std::string>(
          "--text", [a](const std::string& t) { a->text = t; a->have_text = true; },
          "text to encode (default: all of stdin)");
      sub->add_flag("--ids", a->ids, "print the ids space-separated on one line (the default)");
      sub->add_flag("--pieces", a->pieces, "print one line per token: id, vocabulary text, decoded bytes");
      sub->add_flag("--parse-special", a->parse_special, "recognise control tokens (<s>, <|im_start|>) in the text");
      sub->add_flag("--add-special", a->add_special, "add BOS/EOS as the model asks (default: none)");
      return [a] { return RunTokenize(*a); };
    }});

}  // namespace
}  // namespace kvs::cli

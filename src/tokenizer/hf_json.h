// Hugging Face tokenizer files <-> TokenizerSpec.
//
// SpecFromHuggingFace reads tokenizer.json (model BPE; normalizers Prepend,
// Replace with a literal, NFC taken as identity; pre-tokenizers Split,
// ByteLevel, Metaspace, Digits, Punctuation, Sequence; decoders ByteLevel,
// Metaspace, Replace/ByteFallback/Fuse/Strip; post-processors
// TemplateProcessing, Roberta/Bert, ByteLevel) and tokenizer_config.json
// (added_tokens_decoder, bos/eos/unk/pad tokens, add_bos_token,
// add_eos_token, chat_template). Anything else is Unimplemented, naming the
// component, rather than silently tokenizing differently.
// (ExportHuggingFaceJson, the other direction, is test-only: hf_export.h.)
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "base/status.h"
#include "tokenizer/tokenizer.h"

namespace kvs::tok {

StatusOr<TokenizerSpec> SpecFromHuggingFace(const std::string& tokenizer_json,
                                            const std::string& tokenizer_config_json);

}  // namespace kvs::tok

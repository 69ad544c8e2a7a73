// Test oracle: encodes strings with @huggingface/tokenizers (an independent
// implementation of Hugging Face tokenizers) so kvserve's tokenizer can be
// compared with it id for id.
//
//   node hf_tokenize.mjs tokenizer.json inputs.json output.json
//
// inputs.json: a JSON array of strings. output.json: a JSON array with, per
// input, {"ids": [...], "decoded": "..."} (ids without special tokens added;
// decoded = decode(ids) with special tokens kept).
import { readFileSync, writeFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";

const [tokenizerPath, inputsPath, outputPath] = process.argv.slice(2);
if (!outputPath) {
  console.error("usage: node hf_tokenize.mjs tokenizer.json inputs.json output.json");
  process.exit(2);
}
const tokenizerJson = JSON.parse(readFileSync(tokenizerPath, "utf8"));
const inputs = JSON.parse(readFileSync(inputsPath, "utf8"));
const tokenizer = new Tokenizer(tokenizerJson, {});
const results = inputs.map((text) => {
  const ids = tokenizer.encode(text, { add_special_tokens: false }).ids;
  // decode() refuses an empty list (text that is all removed whitespace).
  const decoded =
    ids.length === 0 ? "" : tokenizer.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  return { ids, decoded };
});
writeFileSync(outputPath, JSON.stringify(results));

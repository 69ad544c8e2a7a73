#include "api/openai_request.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "api/request_fields.h"

#include "api/structured_output.h"

namespace kvs::api {

namespace {

using Err = std::optional<ApiError>;

using dialect::Field;

// A value as an error message shows it: scalars (strings cut short),
// arrays and objects by their type only, so no untrusted value is ever
// serialized whole into a message.
std::string Shown(const Json& j) {
  if (j.is_structured()) return JsonTypeName(j);
  if (j.is_string()) return Json(Clip(j.get_ref<const std::string&>(), 37)).dump(-1, ' ', false, Json::error_handler_t::replace);
  return j.dump();
}

Err WrongType(const std::string& name, const char* want, const Json& got) {
  return BadRequest(fmt::format("'{}' must be {}, got {}", name, want, JsonTypeName(got)), name, "invalid_type");
}

bool AsInteger(const Json& j, int64_t* out) {
  if (j.is_number_integer()) {
    if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = j.get<int64_t>();
    return true;
  }
  if (j.is_number_float()) {
    const double d = j.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) {
      *out = static_cast<int64_t>(d);
      return true;
    }
  }
  return false;
}

Err GetInt(const Json& body, const char* name, int64_t lo, int64_t hi, std::optional<int64_t>* out) {
  const Json* f = Field(body, name);
  if (!f) return std::nullopt;
  int64_t v = 0;
  if (!AsInteger(*f, &v)) {
    if (f->is_number()) {
      return BadRequest(fmt::format("'{}' must be an integer, got {}", name, Shown(*f)), name, "invalid_type");
    }
    return WrongType(name, "an integer", *f);
  }
  if (v < lo || v > hi) {
    return BadRequest(fmt::format("'{}' must be an integer in [{}, {}], got {}", name, lo, hi, v), name);
  }
  *out = v;
  return std::nullopt;
}

// The limits of the sampling table (engine::SamplingLimits): the range and
// the message are the engine's own. `name` overrides the field's name.
Err GetLimited(const Json& body, const engine::ParamLimit& l, float* out) {
  const Json* f = Field(body, l.param);
  if (!f) return std::nullopt;
  if (!f->is_number()) return WrongType(l.param, "a number", *f);
  const double v = f->get<double>();
  if (!l.Contains(v)) return BadRequest(l.Message(Shown(*f)), l.param);
  *out = static_cast<float>(v);
  return std::nullopt;
}

Err GetLimited(const Json& body, const engine::ParamLimit& l, std::optional<int64_t>* out, const char* name = nullptr) {
  if (!name) name = l.param;
  return GetInt(body, name, static_cast<int64_t>(l.lo), static_cast<int64_t>(l.hi), out);
}

Err GetBool(const Json& body, const char* name, bool* out) {
  const Json* f = Field(body, name);
  if (!f) return std::nullopt;
  if (!f->is_boolean()) return WrongType(name, "a boolean", *f);
  *out = f->get<bool>();
  return std::nullopt;
}

Err GetString(const Json& body, const char* name, std::string* out) {
  const Json* f = Field(body, name);
  if (!f) return std::nullopt;
  if (!f->is_string()) return WrongType(name, "a string", *f);
  *out = f->get<std::string>();
  return std::nullopt;
}

Err Unsupported(const std::string& name, const std::string& why) {
  return BadRequest(fmt::format("'{}' is not supported: {}", name, why), name, "unsupported_parameter");
}

Err ParseTokenIds(const Json& arr, const std::string& param, std::vector<int32_t>* out) {
  for (size_t i = 0; i < arr.size(); ++i) {
    int64_t v = 0;
    if (!AsInteger(arr[i], &v) || v < 0 || v > INT32_MAX) {
      return BadRequest(fmt::format("'{}' item {} must be a non-negative token id, got {}", param, i, Shown(arr[i])),
                        param);
    }
    out->push_back(static_cast<int32_t>(v));
  }
  return std::nullopt;
}

// Fields shared by both endpoints.
Err ParseCommon(const Json& body, ParsedRequest* r) {
  const Json* model = Field(body, "model");
  if (!model) return BadRequest("you must provide a model parameter", "model", "missing_required_parameter");
  if (!model->is_string()) return WrongType("model", "a string", *model);
  r->model = model->get<std::string>();

  std::optional<int64_t> n;
  if (auto e = GetInt(body, "n", 1, kMaxN, &n)) return e;
  if (n) r->n = static_cast<int32_t>(*n);
  if (auto e = GetBool(body, "stream", &r->stream)) return e;
  if (const Json* so = Field(body, "stream_options")) {
    if (!so->is_object()) return WrongType("stream_options", "an object", *so);
    if (!r->stream) {
      return BadRequest("'stream_options' is only allowed when 'stream' is true", "stream_options");
    }
    if (auto e = GetBool(*so, "include_usage", &r->include_usage)) {
      e->param = "stream_options.include_usage";
      return e;
    }
  }
  using L = engine::SamplingLimits;
  if (auto e = GetLimited(body, L::kTemperature, &r->sampling.temperature)) return e;
  if (auto e = GetLimited(body, L::kTopP, &r->sampling.top_p)) return e;
  std::optional<int64_t> top_k;
  if (auto e = GetLimited(body, L::kTopK, &top_k)) return e;
  if (top_k) r->sampling.top_k = *top_k < 0 ? 0 : static_cast<int32_t>(*top_k);
  if (auto e = GetLimited(body, L::kMinP, &r->sampling.min_p)) return e;
  if (auto e = GetLimited(body, L::kPresencePenalty, &r->sampling.presence_penalty)) return e;
  if (auto e = GetLimited(body, L::kFrequencyPenalty, &r->sampling.frequency_penalty)) return e;
  if (auto e = GetLimited(body, L::kRepetitionPenalty, &r->sampling.repetition_penalty)) return e;
  if (const Json* seed = Field(body, "seed")) {
    int64_t v = 0;
    if (seed->is_number_unsigned()) {
      r->sampling.seed = seed->get<uint64_t>();
    } else if (AsInteger(*seed, &v)) {
      r->sampling.seed = static_cast<uint64_t>(v);
    } else {
      return WrongType("seed", "an integer", *seed);
    }
  }
  if (const Json* stop = Field(body, "stop")) {
    if (stop->is_string()) {
      r->stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      if (stop->size() > kMaxStops) {
        return BadRequest(fmt::format("'stop' may hold at most {} strings, got {}", kMaxStops, stop->size()), "stop");
      }
      for (size_t i = 0; i < stop->size(); ++i) {
        if (!(*stop)[i].is_string()) {
          return BadRequest(fmt::format("'stop' item {} must be a string, got {}", i, JsonTypeName((*stop)[i])), "stop",
                            "invalid_type");
        }
        r->stop.push_back((*stop)[i].get<std::string>());
      }
    } else {
      return WrongType("stop", "a string or an array of strings", *stop);
    }
    for (const auto& s : r->stop) {
      if (s.empty()) return BadRequest("'stop' strings must not be empty", "stop");
      if (s.size() > kMaxStopBytes) {
        return BadRequest(fmt::format("'stop' strings may be at most {} bytes, got {}", kMaxStopBytes, s.size()), "stop");
      }
    }
  }
  if (const Json* ids = Field(body, "stop_token_ids")) {
    if (!ids->is_array()) return WrongType("stop_token_ids", "an array of token ids", *ids);
    if (ids->size() > kMaxStopTokenIds) {
      return BadRequest(fmt::format("'stop_token_ids' may hold at most {} ids, got {}", kMaxStopTokenIds, ids->size()),
                        "stop_token_ids");
    }
    if (auto e = ParseTokenIds(*ids, "stop_token_ids", &r->sampling.stop_token_ids)) return e;
  }
  if (auto e = GetBool(body, "ignore_eos", &r->sampling.ignore_eos)) return e;
  if (auto e = GetBool(body, "speculative", &r->sampling.speculative)) return e;
  if (auto e = GetString(body, "cache_salt", &r->cache_salt)) return e;
  if (r->cache_salt.size() > kMaxCacheSaltBytes) {
    return BadRequest(fmt::format("'cache_salt' may be at most {} bytes, got {}", kMaxCacheSaltBytes, r->cache_salt.size()),
                      "cache_salt");
  }
  std::optional<int64_t> priority;
  if (auto e = GetInt(body, "priority", -1000000, 1000000, &priority)) return e;
  if (priority) r->priority = static_cast<int32_t>(*priority);
  std::string user;
  if (auto e = GetString(body, "user", &user)) return e;
  if (auto e = ParseLogitBias(body, &r->sampling.logit_bias)) return e;
  OutputConstraint constraint;
  if (auto e = ParseConstraint(body, &constraint)) return e;
  r->constraint = std::move(constraint.grammar);
  r->constraint_param = std::move(constraint.param);
  std::optional<int64_t> best_of;
  if (auto e = GetInt(body, "best_of", 1, kMaxN, &best_of)) return e;
  if (best_of && *best_of != r->n) {
    return Unsupported("best_of", "only best_of equal to n (the default) is served");
  }
  return std::nullopt;
}

// chat_template_kwargs and reasoning_effort -> the template's extra
// variables. The renderer's own inputs cannot be replaced: a request that
// wants other messages sends them.
Err ParseTemplateInputs(const Json& body, Json* out) {
  Json kwargs = Json::object();
  if (const Json* effort = Field(body, "reasoning_effort")) {
    if (!effort->is_string()) return WrongType("reasoning_effort", "a string", *effort);
    const auto& s = effort->get_ref<const std::string&>();
    if (s.empty() || s.size() > kMaxReasoningEffortBytes) {
      return BadRequest(fmt::format("'reasoning_effort' must be a string of 1 to {} bytes (e.g. \"low\", \"medium\", "
                                    "\"high\")",
                                    kMaxReasoningEffortBytes),
                        "reasoning_effort");
    }
    kwargs["reasoning_effort"] = s;
  }
  if (const Json* k = Field(body, "chat_template_kwargs")) {
    if (!k->is_object()) return WrongType("chat_template_kwargs", "an object", *k);
    static const char* kReserved[] = {"messages", "tools", "documents", "add_generation_prompt", "bos_token",
                                      "eos_token"};
    for (auto it = k->begin(); it != k->end(); ++it) {
      for (const char* r : kReserved) {
        if (it.key() == r) {
          return BadRequest(fmt::format("'chat_template_kwargs.{}' cannot be set: the server renders it from the "
                                        "request",
                                        r),
                            std::string("chat_template_kwargs.") + r);
        }
      }
      kwargs[it.key()] = it.value();  // wins over reasoning_effort: it is the more specific field
    }
    const size_t bytes = k->dump(-1, ' ', false, Json::error_handler_t::replace).size();
    if (bytes > kMaxTemplateKwargsBytes) {
      return BadRequest(fmt::format("'chat_template_kwargs' must serialize to at most {} bytes, got {}",
                                    kMaxTemplateKwargsBytes, bytes),
                        "chat_template_kwargs");
    }
  }
  *out = std::move(kwargs);
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseJsonObject(std::string_view body, Json* out) {
  // Bounded before parsing: nlohmann's parser does not recurse, but copying,
  // comparing or serializing a parsed value does, so a deep value must never
  // exist. An upper bound of the depth the parser would build: brackets
  // outside strings.
  if (const size_t depth = JsonNestingDepth(body, kMaxJsonDepth); depth > kMaxJsonDepth) {
    return BadRequest(fmt::format("the body nests arrays and objects more than {} levels deep (the limit)", kMaxJsonDepth),
                      std::nullopt, "invalid_json");
  }
  const kvs::JsonCounts counts = kvs::CountJsonContainers(body);
  const kvs::JsonMembers& m = counts.members;
  const kvs::JsonElements& e = counts.elements;
  if (m.largest > kMaxObjectMembers) {
    return BadRequest(fmt::format("an object in the body has {} members; the limit is {} per object", m.largest,
                                  kMaxObjectMembers),
                      std::nullopt, "invalid_json");
  }
  if (m.total > kMaxBodyMembers) {
    return BadRequest(fmt::format("the body's objects have {} members in all; the limit is {}", m.total,
                                  kMaxBodyMembers),
                      std::nullopt, "invalid_json");
  }
  if (e.largest > kMaxArrayElements) {
    return BadRequest(fmt::format("an array in the body has {} elements; the limit is {} per array", e.largest,
                                  kMaxArrayElements),
                      std::nullopt, "invalid_json");
  }
  if (e.total > kMaxBodyElements) {
    return BadRequest(fmt::format("the body's arrays have {} elements in all; the limit is {}", e.total,
                                  kMaxBodyElements),
                      std::nullopt, "invalid_json");
  }
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    // Parse again with exceptions only for the message (where it failed).
    std::string why = "the body is not valid JSON";
    try {
      Json ignored = Json::parse(body);
      (void)ignored;
    } catch (const Json::exception& e) {
      // parse_error, or out_of_range for a number too large for a double
      // (thrown on the second parse; found by request_fuzzer). The message
      // quotes the offending token, which may be megabytes long.
      why = fmt::format("the body is not valid JSON ({})", Clip(e.what(), 200));
    }
    return BadRequest(why, std::nullopt, "invalid_json");
  }
  if (!j.is_object()) return BadRequest("the body must be a JSON object", std::nullopt, "invalid_json");
  *out = std::move(j);
  return std::nullopt;
}

std::optional<ApiError> ParseCompletionRequest(const Json& body, ParsedRequest* out) {
  ParsedRequest r;
  r.endpoint = Endpoint::kCompletions;
  if (auto e = ParseCommon(body, &r)) return e;
  const Json* prompt = Field(body, "prompt");
  if (!prompt) return BadRequest("you must provide a prompt parameter", "prompt", "missing_required_parameter");
  if (prompt->is_string()) {
    r.prompts.push_back({prompt->get<std::string>(), {}});
  } else if (prompt->is_array()) {
    if (prompt->empty()) return BadRequest("'prompt' must not be an empty array", "prompt");
    const Json& first = (*prompt)[0];
    if (first.is_number()) {
      PromptInput p;
      if (auto e = ParseTokenIds(*prompt, "prompt", &p.tokens)) return e;
      r.prompts.push_back(std::move(p));
    } else {
      if (prompt->size() > kMaxPrompts) {
        return BadRequest(fmt::format("'prompt' may hold at most {} prompts, got {}", kMaxPrompts, prompt->size()),
                          "prompt");
      }
      for (size_t i = 0; i < prompt->size(); ++i) {
        const Json& item = (*prompt)[i];
        if (item.is_string()) {
          r.prompts.push_back({item.get<std::string>(), {}});
        } else if (item.is_array() && !item.empty()) {
          PromptInput p;
          if (auto e = ParseTokenIds(item, fmt::format("prompt[{}]", i), &p.tokens)) return e;
          r.prompts.push_back(std::move(p));
        } else {
          return BadRequest(fmt::format("'prompt' item {} must be a string or a non-empty array of token ids, got {}",
                                        i, JsonTypeName(item)),
                            "prompt", "invalid_type");
        }
      }
    }
  } else {
    return WrongType("prompt", "a string, an array of strings, or token ids", *prompt);
  }
  if (r.prompts.size() * static_cast<size_t>(r.n) > kMaxPrompts) {
    return BadRequest(fmt::format("prompts x n must be at most {}, got {} x {}", kMaxPrompts, r.prompts.size(), r.n),
                      "n");
  }
  if (auto e = GetLimited(body, engine::SamplingLimits::kMaxTokens, &r.max_tokens)) return e;
  std::optional<int64_t> logprobs;
  if (const Json* lp = Field(body, "logprobs"); lp && lp->is_boolean()) {
    return BadRequest("'logprobs' of /v1/completions is the number of alternatives, an integer in [0, 20]",
                      "logprobs", "invalid_type");
  }
  if (auto e = GetLimited(body, engine::SamplingLimits::kLogprobs, &logprobs)) return e;
  if (logprobs) r.sampling.logprobs = static_cast<int32_t>(*logprobs);
  if (auto e = GetBool(body, "echo", &r.echo)) return e;
  if (r.echo && r.sampling.logprobs) {
    return Unsupported("echo", "echo together with logprobs would need prompt logprobs");
  }
  std::string suffix;
  if (auto e = GetString(body, "suffix", &suffix)) return e;
  if (!suffix.empty()) return Unsupported("suffix", "insertion (fill-in-the-middle) is not served");
  *out = std::move(r);
  return std::nullopt;
}

std::optional<ApiError> FlattenContent(const Json& content, const std::string& param, std::string* out) {
  return dialect::JoinedText(
      content, param, "content parts", "a content part object",
      [](const Json& part, const std::string& p, std::string* text) -> Err {
        const Json* type = Field(part, "type");
        if (!type || !type->is_string()) return BadRequest(fmt::format("'{}.type' must be a string", p), p + ".type");
        if (type->get<std::string>() != "text") {
          return BadRequest(fmt::format("content part type '{}' is not supported; kvserve serves text only",
                                        Clip(type->get<std::string>(), 40)),
                            p + ".type", "unsupported_parameter");
        }
        const Json* t = Field(part, "text");
        if (!t || !t->is_string()) return BadRequest(fmt::format("'{}.text' must be a string", p), p + ".text");
        *text = t->get<std::string>();
        return std::nullopt;
      },
      out);
}

std::optional<ApiError> ParseChatRequest(const Json& body, ParsedRequest* out) {
  ParsedRequest r;
  r.endpoint = Endpoint::kChatCompletions;
  if (auto e = ParseCommon(body, &r)) return e;
  const Json* messages = Field(body, "messages");
  if (!messages) return BadRequest("you must provide a messages parameter", "messages", "missing_required_parameter");
  if (!messages->is_array()) return WrongType("messages", "an array", *messages);
  if (messages->empty()) return BadRequest("'messages' must hold at least one message", "messages");
  static const std::vector<std::string> kRoles = {"system", "developer", "user", "assistant", "tool"};
  r.messages = Json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string p = fmt::format("messages[{}]", i);
    if (!m.is_object()) return WrongType(p, "an object", m);
    const Json* role = Field(m, "role");
    if (!role || !role->is_string()) return BadRequest(fmt::format("'{}.role' must be a string", p), p + ".role");
    const std::string rs = role->get<std::string>();
    if (std::find(kRoles.begin(), kRoles.end(), rs) == kRoles.end()) {
      return BadRequest(fmt::format("'{}.role' must be one of system, developer, user, assistant, tool; got '{}'", p,
                                    Clip(rs, 40)),
                        p + ".role");
    }
    Json msg = m;
    const Json* content = Field(m, "content");
    if (content) {
      std::string text;
      if (auto e = FlattenContent(*content, p + ".content", &text)) return e;
      msg["content"] = text;
    } else if (rs == "assistant" && Field(m, "tool_calls")) {
      msg["content"] = nullptr;
    } else {
      return BadRequest(fmt::format("'{}.content' is required", p), p + ".content", "missing_required_parameter");
    }
    r.messages.push_back(std::move(msg));
  }
  std::optional<int64_t> mt, mct;
  if (auto e = GetLimited(body, engine::SamplingLimits::kMaxTokens, &mt)) return e;
  if (auto e = GetLimited(body, engine::SamplingLimits::kMaxTokens, &mct, "max_completion_tokens")) return e;
  if (mct) {
    r.max_tokens = mct;
    r.max_tokens_param = "max_completion_tokens";
  } else {
    r.max_tokens = mt;
  }
  bool logprobs = false;
  if (auto e = GetBool(body, "logprobs", &logprobs)) return e;
  std::optional<int64_t> top;
  if (auto e = GetLimited(body, engine::SamplingLimits::kLogprobs, &top, "top_logprobs")) return e;
  if (top && !logprobs) return BadRequest("'top_logprobs' needs 'logprobs' set to true", "top_logprobs");
  if (logprobs) r.sampling.logprobs = static_cast<int32_t>(top.value_or(0));
  using TC = ParsedRequest::ToolChoice;
  if (const Json* tc = Field(body, "tool_choice")) {
    const char* kWant = "\"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";
    if (tc->is_string()) {
      const auto& s = tc->get_ref<const std::string&>();
      if (s == "auto") {
        r.tool_choice = TC::kAuto;
      } else if (s == "none") {
        r.tool_choice = TC::kNone;
      } else if (s == "required") {
        r.tool_choice = TC::kRequired;
      } else {
        return BadRequest(fmt::format("'tool_choice' must be {}, got {}", kWant, Shown(*tc)), "tool_choice");
      }
    } else if (tc->is_object()) {
      const Json* fn = Field(*tc, "function");
      const Json* name = fn && fn->is_object() ? Field(*fn, "name") : nullptr;
      if (!name || !name->is_string()) {
        return BadRequest(fmt::format("'tool_choice' must be {}", kWant), "tool_choice");
      }
      r.tool_choice = TC::kNamed;
      r.tool_choice_name = name->get<std::string>();
    } else {
      return WrongType("tool_choice", "a string or an object", *tc);
    }
  }
  if (auto e = GetBool(body, "parallel_tool_calls", &r.parallel_tool_calls)) return e;
  if (const Json* tools = Field(body, "tools")) {
    if (!tools->is_array()) return WrongType("tools", "an array", *tools);
    if (r.tool_choice != TC::kNone) {
      r.tools = *tools;
    }
  }
  if (r.tool_choice == TC::kRequired || r.tool_choice == TC::kNamed) {
    if (r.tools.empty()) return BadRequest("'tool_choice' forces a tool call but 'tools' is empty", "tool_choice");
    if (r.tool_choice == TC::kNamed) {
      bool found = false;
      for (const Json& t : r.tools) {
        const Json* fn = t.is_object() ? Field(t, "function") : nullptr;
        found = found || (fn && fn->is_object() && fn->value("name", Json()) == r.tool_choice_name);
      }
      if (!found) {
        return BadRequest(fmt::format("'tool_choice' names function \"{}\", which is not in 'tools'",
                                      Clip(r.tool_choice_name, 64)),
                          "tool_choice");
      }
    }
    if (r.constraint) {
      return BadRequest(fmt::format("'tool_choice' forcing a call cannot be combined with '{}'", r.constraint_param),
                        "tool_choice");
    }
  }
  if (Field(body, "echo")) return Unsupported("echo", "chat completions have no echo");
  if (auto e = ParseTemplateInputs(body, &r.template_kwargs)) return e;
  *out = std::move(r);
  return std::nullopt;
}

std::optional<ApiError> ParseTokenizeRequest(const Json& body, TokenizeRequest* out) {
  TokenizeRequest r;
  if (const Json* model = Field(body, "model")) r.model = model->is_string() ? model->get<std::string>() : "?";
  const Json* prompt = Field(body, "prompt");
  const Json* messages = Field(body, "messages");
  if ((prompt != nullptr) == (messages != nullptr)) {
    return BadRequest("give exactly one of 'prompt' (a string) or 'messages'", "prompt", "missing_required_parameter");
  }
  r.add_special_tokens = prompt != nullptr;
  if (auto e = GetBool(body, "add_special_tokens", &r.add_special_tokens)) return e;
  if (auto e = GetBool(body, "return_token_strs", &r.return_token_strs)) return e;
  if (auto e = GetBool(body, "add_generation_prompt", &r.add_generation_prompt)) return e;
  if (prompt) {
    if (!prompt->is_string()) return BadRequest("'prompt' must be a string", "prompt", "invalid_type");
    r.prompt = prompt->get<std::string>();
  } else {
    // The messages and tools as a chat request would carry them.
    Json chat = {{"model", "tokenize"}, {"messages", *messages}};
    for (const char* k : {"tools", "chat_template_kwargs", "reasoning_effort"}) {
      if (const Json* f = Field(body, k)) chat[k] = *f;
    }
    if (auto e = ParseChatRequest(chat, &r.chat)) return e;
  }
  *out = std::move(r);
  return std::nullopt;
}

std::optional<ApiError> ParseDetokenizeRequest(const Json& body, DetokenizeRequest* out) {
  const Json* tokens = Field(body, "tokens");
  if (!tokens || !tokens->is_array()) {
    return BadRequest("'tokens' must be an array of token ids", "tokens", "invalid_type");
  }
  DetokenizeRequest r;
  if (auto e = ParseTokenIds(*tokens, "tokens", &r.tokens)) return e;
  *out = std::move(r);
  return std::nullopt;
}

}  // namespace kvs::api

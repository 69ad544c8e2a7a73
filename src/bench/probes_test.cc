#include "bench/probes.h"

#include <gtest/gtest.h>

#include "bench/workload.h"

namespace kvs::bench {
namespace {

TEST(Probes, ParseTheDocumentedFormAndNameTheFault) {
  auto p = ParseProbes("arithmetic:0.1, json:0.05,over-length:0.02,malformed:0.02");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->size(), 4u);
  EXPECT_EQ((*p)[2].first, ProbeKind::kOverLength);
  EXPECT_EQ(FormatProbes(*p), "arithmetic:0.1,json:0.05,over_length:0.02,malformed:0.02");
  EXPECT_NE(ParseProbes("maths:0.1").status().message().find("KIND one of"), std::string::npos);
  EXPECT_FALSE(ParseProbes("json:0").ok());
  EXPECT_FALSE(ParseProbes("json:1.5").ok());
  EXPECT_FALSE(ParseProbes("json:0.1x").ok());
  EXPECT_NE(ParseProbes("json:0.6,recall:0.6").status().message().find("add up to 1.2"), std::string::npos);
  EXPECT_NE(ParseProbes("json:0.1,json:0.2").status().message().find("twice"), std::string::npos);
}

TEST(Probes, FirstSentenceNumbersStopAtTheSentenceEnd) {
  EXPECT_EQ(FirstSentenceNumbers("3 plus 4 is 7. 5 plus 1 is 6."), (std::vector<std::string>{"3", "4", "7"}));
  EXPECT_EQ(FirstSentenceNumbers(" 4821.\nThe secret number is 9"), (std::vector<std::string>{"4821"}));
  EXPECT_EQ(FirstSentenceNumbers("It is 3.5 or 07"), (std::vector<std::string>{"3", "5", "7"}));
  EXPECT_TRUE(FirstSentenceNumbers("The sun is yellow. 7").empty());
}

TEST(Probes, ArithmeticAndRecallScoreTheNumberAndNothingElse) {
  Rng rng(3);
  ProbePrompt a = MakeArithmeticProbe(rng, /*chat=*/true);
  const std::string x = a.probe.allowed[0], y = a.probe.allowed[1], sum = a.probe.expected;
  EXPECT_EQ(a.text, "What is " + x + " plus " + y + "?");
  EXPECT_EQ(std::stoi(sum), std::stoi(x) + std::stoi(y));
  ProbeOutcome o{200, false, x + " plus " + y + " is " + sum + ".", "", "stop"};
  EXPECT_TRUE(ScoreProbe(a.probe, o).ok);
  o.answer = "The answer is " + sum + " or " + std::to_string(std::stoi(sum) + 1) + ".";
  EXPECT_EQ(ScoreProbe(a.probe, o).miss, "wrong_number");
  o.answer = "The sun is yellow.";
  EXPECT_EQ(ScoreProbe(a.probe, o).miss, "no_number");
  o = {503, false, "", R"({"error":{"message":"overloaded"}})", ""};
  EXPECT_EQ(ScoreProbe(a.probe, o).miss, "http_error");

  RecallFact f = MakeRecallFact(rng);
  EXPECT_NE(f.fact.find(f.question.probe.expected), std::string::npos);
  for (size_t i = 1; i < f.question.probe.expected.size(); ++i) {
    EXPECT_NE(f.question.probe.expected[i], f.question.probe.expected[i - 1]) << "no digit twice in a row";
  }
  o = {200, false, f.answer_prefix + " " + f.question.probe.expected + ".", "", "stop"};
  EXPECT_TRUE(ScoreProbe(f.question.probe, o).ok);
  o.answer = " " + f.question.probe.expected + "5.";  // one digit too many is another number
  EXPECT_EQ(ScoreProbe(f.question.probe, o).miss, "wrong_number");
}

TEST(Probes, JsonAnswersAreCheckedAgainstTheSchema) {
  Rng rng(5);
  ProbePrompt j = MakeJsonProbe(rng);
  ProbeOutcome o{200, false, R"({"name": "Zoe", "age": 7, "color": "red"})", "", "stop"};
  EXPECT_TRUE(ScoreProbe(j.probe, o).ok) << ScoreProbe(j.probe, o).detail;
  o.answer = R"({"name": "Zoe", "age": 700, "color": "red"})";
  ProbeVerdict v = ScoreProbe(j.probe, o);
  EXPECT_EQ(v.miss, "schema");
  EXPECT_NE(v.detail.find("age"), std::string::npos) << v.detail;
  o.answer = R"({"name": "Zoe", "age": 7, "color": "red", "x": 1})";
  EXPECT_EQ(ScoreProbe(j.probe, o).miss, "schema");
  o.answer = R"({"name": "Zoe", "age": 7)";
  EXPECT_EQ(ScoreProbe(j.probe, o).miss, "invalid_json");
  o.finish_reason = "length";
  EXPECT_EQ(ScoreProbe(j.probe, o).miss, "truncated");
}

TEST(Probes, ExpectedErrorsNeedA4xxWithAJsonMessage) {
  Rng rng(1);
  Probe m = MakeMalformedProbe(rng).probe;
  EXPECT_TRUE(ScoreProbe(m, {400, false, "", R"({"error":{"message":"bad max_tokens","type":"x"}})", ""}).ok);
  EXPECT_TRUE(ScoreProbe(m, {422, false, "", R"({"detail":"x","message":"bad"})", ""}).ok);
  EXPECT_EQ(ScoreProbe(m, {200, false, "hello", "", "stop"}).miss, "accepted");
  EXPECT_EQ(ScoreProbe(m, {500, false, "", "parse error", ""}).miss, "server_error");
  EXPECT_EQ(ScoreProbe(m, {400, false, "", "bad request", ""}).miss, "no_error_message");
  EXPECT_EQ(ScoreProbe(m, {0, true, "", "", ""}).miss, "transport");
  Probe over = MakeOverLengthProbe();
  EXPECT_TRUE(ScoreProbe(over, {413, false, "", R"({"error":"too long"})", ""}).ok);
  EXPECT_EQ(ScoreProbe(over, {422, false, "", R"({"error":"too long"})", ""}).miss, "wrong_status");

  // Each variant's body is what it says.
  for (const char* variant : {"invalid_json", "wrong_type", "missing_field"}) {
    m.variant = variant;
    const std::string body = MalformedBody(m, "tiny", /*chat=*/true);
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (m.variant == "invalid_json") {
      EXPECT_TRUE(j.is_discarded()) << body;
    } else if (m.variant == "wrong_type") {
      EXPECT_TRUE(j["max_tokens"].is_string()) << body;
    } else {
      EXPECT_FALSE(j.contains("messages")) << body;
    }
  }
}

TEST(Probes, PlansDrawKindsByShareAndPutRecallOnLastTurns) {
  WorkloadSpec s;
  s.num_requests = 400;
  s.input_len = 64;
  s.probes = *ParseProbes("arithmetic:0.25,malformed:0.25");
  auto runs = ExpandRuns(s);
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  int arith = 0, bad = 0;
  for (const PlannedRequest& r : (*runs)[0].requests) {
    arith += r.probe == ProbeKind::kArithmetic;
    bad += r.probe == ProbeKind::kMalformed;
  }
  EXPECT_GT(arith, 60);
  EXPECT_LT(arith, 140);
  EXPECT_GT(bad, 60);
  EXPECT_LT(bad, 140);
  // The rest of the plan is the same with and without probes.
  WorkloadSpec plain = s;
  plain.probes.clear();
  auto same = ExpandRuns(plain);
  ASSERT_EQ((*same)[0].requests.size(), (*runs)[0].requests.size());
  EXPECT_EQ((*same)[0].requests[7].input_tokens, (*runs)[0].requests[7].input_tokens);

  WorkloadSpec m;
  m.api = ApiKind::kChat;
  m.multi_turn = {40, 3, 0};
  m.probes = *ParseProbes("recall:0.5");
  runs = ExpandRuns(m);
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  int asked = 0;
  for (const PlannedRequest& r : (*runs)[0].requests) {
    if (r.probe == ProbeKind::kNone) continue;
    EXPECT_EQ(r.turn, 2);
    ++asked;
  }
  EXPECT_GT(asked, 8);
  EXPECT_LT(asked, 32);
  m.probes = *ParseProbes("json:0.5");
  EXPECT_NE(ValidateSpec(m).message().find("recall probes only"), std::string::npos);
  m.probes = *ParseProbes("recall:0.5");
  m.multi_turn.turns = 1;
  EXPECT_NE(ValidateSpec(m).message().find("two or more turns"), std::string::npos);
  auto file = ParseWorkloadYaml("probes: {recall: 0.2, over-length: 0.1}\n", WorkloadSpec{});
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(FormatProbes(file->specs[0].probes), "recall:0.2,over_length:0.1");
}

}  // namespace
}  // namespace kvs::bench

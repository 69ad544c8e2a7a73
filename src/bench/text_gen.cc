#include "bench/text_gen.h"

#include <cctype>
#include <fstream>
#include <sstream>
#include <string_view>

namespace kvs::bench {

namespace {

template <size_t N>
const char* Pick(Rng& rng, const char* const (&list)[N]) {
  return list[std::uniform_int_distribution<size_t>(0, N - 1)(rng)];
}

// Word lists for the prose generator. Written for this project; plain
// vocabulary so that every tokenizer splits it into ordinary word pieces.
constexpr const char* kPeople[] = {
    "farmer", "teacher", "engineer", "baker", "nurse", "pilot", "carpenter", "librarian", "fisherman",
    "gardener", "mayor", "student", "painter", "doctor", "merchant", "shepherd", "clerk", "musician",
    "driver", "scientist", "writer", "tailor", "miner", "chef", "sailor", "judge", "architect", "potter"};
constexpr const char* kPeoplePlural[] = {
    "farmers", "teachers", "engineers", "travellers", "neighbours", "children", "workers", "visitors",
    "families", "students", "shopkeepers", "fishermen", "volunteers", "officials", "residents", "pilgrims"};
constexpr const char* kNames[] = {
    "Martha", "Jonas", "Elena", "Tobias", "Ingrid", "Samuel", "Lucia", "Arthur", "Helena", "Victor",
    "Nadia", "Oliver", "Rosa", "Felix", "Greta", "Hugo", "Clara", "Matteo", "Agnes", "Pavel", "Leah", "Anton"};
constexpr const char* kSurnames[] = {
    "Keller", "Brandt", "Moreau", "Lindqvist", "Novak", "Okafor", "Haddad", "Ferreira", "Takahashi", "Kowalski",
    "Marsh", "Delgado", "Fischer", "Ambrose", "Petrov", "Whitfield", "Castellan", "Osei", "Varga", "Holloway",
    "Brennan", "Sato", "Lindgren", "Quist", "Romero", "Albright", "Nakamura", "Duval", "Ivanova", "Thorne"};
constexpr const char* kPlaces[] = {
    "harbor", "valley", "market square", "old mill", "railway station", "library", "orchard", "bridge",
    "village hall", "lighthouse", "riverbank", "workshop", "school", "museum", "bakery", "factory",
    "mountain pass", "garden", "town square", "hospital", "stable", "vineyard", "cathedral", "quarry"};
constexpr const char* kObjects[] = {
    "letter", "map", "lantern", "basket of apples", "wooden chest", "old clock", "bicycle", "painting",
    "ledger", "fishing net", "violin", "set of keys", "telescope", "quilt", "cart", "notebook", "kettle",
    "compass", "loaf of bread", "bundle of wool", "stone tablet", "wagon wheel", "copper pot"};
constexpr const char* kAdjectives[] = {
    "quiet", "busy", "careful", "tired", "cheerful", "patient", "curious", "stubborn", "generous", "young",
    "elderly", "clever", "cautious", "proud", "restless", "gentle", "thoughtful", "honest", "weary", "bold"};
constexpr const char* kWeather[] = {
    "the rain came down over the hills", "the fog rolled in from the sea", "the wind shook the shutters",
    "the sun warmed the stone walls", "snow covered the rooftops", "clouds gathered in the west",
    "frost settled on the fields", "a storm passed over the coast", "the air grew warm and still"};
constexpr const char* kTimes[] = {
    "Early in the morning", "Late that evening", "On the first day of spring", "Before the market opened",
    "After the harvest", "During the long winter", "At noon", "Just before dawn", "Some weeks later",
    "In the middle of the summer", "That afternoon", "Once the bells had rung", "By the end of the week"};
constexpr const char* kVerbsPast[] = {
    "repaired", "carried", "found", "sold", "painted", "examined", "borrowed", "returned", "cleaned",
    "measured", "described", "delivered", "polished", "wrapped", "counted", "hid", "discovered", "mended"};
constexpr const char* kVerbsPresent[] = {
    "gather", "trade", "walk", "rest", "argue", "sing", "work", "wait", "read", "cook", "talk", "listen"};
constexpr const char* kTopics[] = {
    "the price of grain", "the new road to the coast", "the repairs to the bridge", "the autumn fair",
    "the water in the wells", "the history of the town", "the lessons at the school", "the coming election",
    "the shortage of timber", "the arrival of the train", "the catch of the fishing boats", "the old legends"};
constexpr const char* kOrgs[] = {
    "town council", "local newspaper", "guild of weavers", "school board", "harbor master", "railway company",
    "farmers' union", "historical society", "hospital committee", "chamber of commerce"};
constexpr const char* kReasons[] = {
    "because nobody else knew how", "so that the children could see it", "before the weather turned",
    "as the custom required", "to settle an old argument", "without telling anyone", "with great care",
    "for the first time in years", "in exchange for a warm meal", "while the others were asleep"};
constexpr const char* kReflections[] = {
    "Nobody could remember a year quite like it.",
    "It was the kind of detail that people talk about for a long time.",
    "Some said it was a sign of better days ahead.",
    "The matter was discussed at every table in town.",
    "Few people noticed, but those who did never forgot it.",
    "It seemed a small thing at the time.",
    "Everyone agreed that something had to change.",
    "The story spread quickly along the coast.",
    "Later, people would argue about what really happened.",
    "There was still much work to be done."};

std::string Capitalize(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

class ProseSource final : public TextSource {
 public:
  std::string Next(Rng& rng) const override {
    const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
    std::string s;
    switch (kind) {
      case 0:
        s = std::string(Pick(rng, kTimes)) + ", the " + Pick(rng, kAdjectives) + " " + Pick(rng, kPeople) + " " +
            Pick(rng, kVerbsPast) + " the " + Pick(rng, kObjects) + " near the " + Pick(rng, kPlaces) + ".";
        break;
      case 1:
        s = std::string(Pick(rng, kNames)) + " " + Pick(rng, kVerbsPast) + " the " + Pick(rng, kObjects) + " " +
            Pick(rng, kReasons) + ".";
        break;
      case 2:
        s = "Most " + std::string(Pick(rng, kPeoplePlural)) + " in the " + Pick(rng, kPlaces) + " " +
            Pick(rng, kVerbsPresent) + " together when " + Pick(rng, kWeather) + ".";
        break;
      case 3:
        s = "The " + std::string(Pick(rng, kOrgs)) + " reported that " + Pick(rng, kTopics) +
            " had become a serious concern.";
        break;
      case 4:
        s = "Although " + std::string(Pick(rng, kWeather)) + ", the " + Pick(rng, kPeoplePlural) +
            " kept talking about " + Pick(rng, kTopics) + ".";
        break;
      case 5:
        s = Capitalize(Pick(rng, kReflections));
        break;
      case 6:
        s = std::string("When ") + Pick(rng, kNames) + " reached the " + Pick(rng, kPlaces) + ", the " +
            Pick(rng, kPeople) + " was already waiting with a " + Pick(rng, kObjects) + ".";
        break;
      case 7:
        s = std::string("Nobody at the ") + Pick(rng, kPlaces) + " expected the " + Pick(rng, kOrgs) +
            " to change its mind about " + Pick(rng, kTopics) + ".";
        break;
      case 8:
        s = std::string("The ") + Pick(rng, kAdjectives) + " " + Pick(rng, kPeople) + " asked whether " +
            Pick(rng, kTopics) + " would be settled before the " + Pick(rng, kPlaces) + " closed.";
        break;
      default:
        s = std::string(Pick(rng, kNames)) + " and " + Pick(rng, kNames) + " walked from the " + Pick(rng, kPlaces) +
            " to the " + Pick(rng, kPlaces) + ", talking about " + Pick(rng, kTopics) + ".";
        break;
    }
    return s;
  }
  std::string First(Rng& rng) const override {
    // Three distinct full names open the text: ~22 x 30 choices each.
    std::string who[3];
    for (int i = 0; i < 3; ++i) {
      do {
        who[i] = std::string(Pick(rng, kNames)) + " " + Pick(rng, kSurnames);
      } while ((i > 0 && who[i] == who[0]) || (i > 1 && who[i] == who[1]));
    }
    return who[0] + ", " + who[1] + " and " + who[2] + " met at the " + Pick(rng, kPlaces) + " to talk about " +
           Pick(rng, kTopics) + ".";
  }
  std::string Name() const override { return "prose"; }
};

// Plain filler sentences: the same pool the bundled model's training data
// uses for its haystacks (tools/train/data.py, FILLER).
constexpr const char* kFiller[] = {
    "The grass is green.", "The sky is blue.", "The sun is yellow.", "Here we go.",
    "There and back again.", "The river flows slowly.", "Birds sing in the morning.",
    "The wind is soft today.", "A small boat sails on the lake.", "The trees are tall.",
    "The road goes on and on.", "Clouds move across the sky.", "The night is quiet.",
    "Flowers grow in the field.", "The hills are far away.", "Rain falls on the roof.",
    "The stars shine at night.", "A cat sleeps in the sun.", "The sea is wide and deep.",
    "Leaves fall in the autumn."};

class FillerSource final : public TextSource {
 public:
  std::string Next(Rng& rng) const override { return Pick(rng, kFiller); }
  std::string Name() const override { return "filler"; }
};

class FileSource final : public TextSource {
 public:
  FileSource(std::string path, std::vector<std::string> sentences)
      : path_(std::move(path)), sentences_(std::move(sentences)) {}
  // A random sentence of the file; MakeWords takes consecutive ones instead.
  std::string Next(Rng& rng) const override {
    return sentences_[std::uniform_int_distribution<size_t>(0, sentences_.size() - 1)(rng)];
  }
  std::string Name() const override { return path_; }
  const std::vector<std::string>& sentences() const { return sentences_; }

 private:
  std::string path_;
  std::vector<std::string> sentences_;
};

bool EndsSentence(std::string_view w) {
  while (!w.empty() && (w.back() == '"' || w.back() == '\'' || w.back() == ')')) w.remove_suffix(1);
  return !w.empty() && (w.back() == '.' || w.back() == '!' || w.back() == '?');
}

}  // namespace

std::unique_ptr<TextSource> MakeProseSource() { return std::make_unique<ProseSource>(); }
std::unique_ptr<TextSource> MakeFillerSource() { return std::make_unique<FillerSource>(); }

StatusOr<std::unique_ptr<TextSource>> MakeFileSource(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read the text file {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  // Split into words, then sentences at words ending in . ! or ?.
  std::vector<std::string> sentences;
  std::string cur;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    const size_t j0 = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i == j0) break;
    std::string_view w(text.data() + j0, i - j0);
    if (!cur.empty()) cur += ' ';
    cur += w;
    if (EndsSentence(w) || cur.size() > 400) {
      sentences.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) sentences.push_back(std::move(cur));
  if (sentences.empty()) return InvalidArgument("the text file {} has no words", path);
  return std::unique_ptr<TextSource>(std::make_unique<FileSource>(path, std::move(sentences)));
}

StatusOr<std::unique_ptr<TextSource>> MakeTextSource(const std::string& spec) {
  if (spec == "prose" || spec.empty()) return MakeProseSource();
  if (spec == "filler") return MakeFillerSource();
  return MakeFileSource(spec);
}

std::string WordStream::Join(size_t n) const { return Join(0, n); }

std::string WordStream::Join(size_t begin, size_t end) const {
  std::string out;
  end = std::min(end, words.size());
  for (size_t i = begin; i < end; ++i) {
    if (i > begin) out += ' ';
    out += words[i];
  }
  return out;
}

void WordStream::Append(const std::string& sentence) {
  size_t i = 0;
  const size_t first = words.size();
  while (i < sentence.size()) {
    while (i < sentence.size() && std::isspace(static_cast<unsigned char>(sentence[i]))) ++i;
    const size_t j0 = i;
    while (i < sentence.size() && !std::isspace(static_cast<unsigned char>(sentence[i]))) ++i;
    if (i > j0) {
      words.emplace_back(sentence.substr(j0, i - j0));
      sentence_end.push_back(false);
    }
  }
  if (words.size() > first) sentence_end.back() = true;
}

WordStream MakeWords(const TextSource& source, Rng& rng, size_t min_words) {
  WordStream ws;
  if (const auto* file = dynamic_cast<const FileSource*>(&source)) {
    // Consecutive sentences of the file from a random start.
    const auto& s = file->sentences();
    size_t k = std::uniform_int_distribution<size_t>(0, s.size() - 1)(rng);
    while (ws.words.size() < min_words) {
      ws.Append(s[k]);
      k = (k + 1) % s.size();
    }
    return ws;
  }
  ws.Append(source.First(rng));
  while (ws.words.size() < min_words) ws.Append(source.Next(rng));
  return ws;
}

const std::vector<std::string>& GivenNames() {
  static const std::vector<std::string> kNames = {
    "Alice", "Bob",   "Carol", "David", "Emma",  "Frank", "Grace", "Henry", "Iris",  "Jack", "Kate",  "Leo",
    "Mia",   "Noah",  "Olivia", "Paul", "Quinn", "Rose",  "Sam",   "Tina",  "Uma",   "Victor", "Wendy", "Xavier",
    "Yara",  "Zoe",   "Anna",  "Ben",   "Clara", "Dan",   "Eva",   "Finn",  "Gina",  "Hugo", "Ivy",   "Jonas"};
  return kNames;
}

}  // namespace kvs::bench

#include "core/data/builtin_corpus.hpp"

#include <array>
#include <string_view>

#include "core/rng.hpp"

namespace st {
namespace {

constexpr std::array<std::string_view, 16> kSubjects = {
    "the king",    "a sailor",      "the old queen", "my brother", "the merchant", "a young maid",
    "the captain", "our neighbour", "the miller",    "a stranger", "the poet",     "his daughter",
    "the soldier", "a fisherman",   "the bishop",    "her cousin"};
constexpr std::array<std::string_view, 16> kVerbs = {
    "loves", "watches", "follows", "remembers", "forgives", "answers", "carries", "praises",
    "fears", "visits",  "greets",  "doubts",    "leaves",   "finds",   "teaches", "calls"};
constexpr std::array<std::string_view, 16> kObjects = {
    "the river",        "a silver cup",   "the northern road", "an empty house",
    "the bright sea",   "a quiet garden", "the tall ship",     "a letter",
    "the winter field", "an old song",    "the city gate",     "a golden ring",
    "the dark forest",  "a small boat",   "the market",        "the sky"};
constexpr std::array<std::string_view, 8> kClauses = {
    "when the bells ring",      "before the night falls", "because the wind is cold",
    "while the children sleep", "after the long rain",    "as the sun goes down",
    "though nobody asks",       "until the morning comes"};
constexpr std::array<std::string_view, 4> kSpeakers = {"KING", "SAILOR", "QUEEN", "POET"};

constexpr uint64_t kCorpusSeed = 0x5348415244ull;  // fixed: the corpus never changes

}  // namespace

std::string builtin_corpus(size_t bytes) {
  std::string text;
  text.reserve(bytes + 256);
  uint64_t draw = 0;
  auto pick = [&](size_t n) { return size_t(uniform_int_at(kCorpusSeed, 1, draw++, n)); };
  while (text.size() < bytes) {
    text += kSpeakers[pick(kSpeakers.size())];
    text += ":\n";
    const size_t sentences = 1 + pick(4);
    for (size_t s = 0; s < sentences; ++s) {
      std::string sentence(kSubjects[pick(kSubjects.size())]);
      sentence[0] = char(sentence[0] - 'a' + 'A');
      sentence += ' ';
      sentence += kVerbs[pick(kVerbs.size())];
      sentence += ' ';
      sentence += kObjects[pick(kObjects.size())];
      if (pick(3) == 0) {
        sentence += ' ';
        sentence += kClauses[pick(kClauses.size())];
      }
      sentence += pick(5) == 0 ? "?" : ".";
      text += sentence;
      text += s + 1 < sentences ? " " : "\n";
    }
    text += '\n';
  }
  return text;
}

}  // namespace st

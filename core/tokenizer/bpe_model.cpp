#include "core/tokenizer/bpe_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <queue>
#include <tuple>

#include "core/error.hpp"
#include "core/tokenizer/json_fields.hpp"
#include "core/tokenizer/unicode.hpp"

namespace st {

using namespace tokenizer_json;

namespace {

constexpr size_t kMaxCachedWord = 256;        // bytes; longer pre-tokens are rare and not reused
constexpr size_t kMaxCacheEntries = 1 << 20;  // then the cache starts again

std::pair<std::string, std::string> merge_pair(const Json& m, size_t rank,
                                               const std::string& where) {
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const size_t space = s.find(' ');
    if (space != std::string::npos && space > 0 && space + 1 < s.size() &&
        s.find(' ', space + 1) == std::string::npos)
      return {s.substr(0, space), s.substr(space + 1)};
  } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  }
  fail_input("{}.merges[{}] = {} must be \"a b\" or [\"a\", \"b\"]", where, rank,
             m.dump().substr(0, 80));
}

// Whether every token holding `mark` holds it only in a run at its start: then no token, and so
// no merge, spans a place where `mark` follows another character.
bool only_leading(const TokenIds& vocab, const std::string& mark) {
  if (!vocab.count(mark)) return false;
  for (const auto& [token, id] : vocab) {
    size_t lead = 0;
    while (token.compare(lead, mark.size(), mark) == 0) lead += mark.size();
    if (token.find(mark, lead) != std::string::npos) return false;
  }
  return true;
}

// Two tokens with one id would decode that id to either: refused, naming both.
void check_unique_ids(const TokenIds& vocab, const std::string& where) {
  std::vector<std::pair<int32_t, const std::string*>> by_id;
  by_id.reserve(vocab.size());
  for (const auto& [token, id] : vocab) by_id.emplace_back(id, &token);
  std::sort(by_id.begin(), by_id.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first, *a.second) < std::tie(b.first, *b.second);
  });
  for (size_t i = 1; i < by_id.size(); ++i)
    if (by_id[i].first == by_id[i - 1].first)
      fail_input(
          "{}.vocab['{}'] and vocab['{}'] both have id {}; each token needs an id of its own",
          where, printable(*by_id[i - 1].second), printable(*by_id[i].second), by_id[i].first);
}

}  // namespace

BpeModel::BpeModel(const Json& j, const std::string& where) {
  const Json* vocab = find(j, "vocab");
  if (!vocab || !vocab->is_object() || vocab->empty())
    fail_input("{}.vocab must be an object mapping tokens to ids", where);
  vocab_.reserve(vocab->size());
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= INT32_MAX)
      fail_input("{}.vocab['{}'] = {} must be an id 0..{}", where, printable(token), id.dump(),
                 INT32_MAX - 1);
    vocab_.emplace(token, int32_t(id.get<int64_t>()));
  }
  check_unique_ids(vocab_, where);
  require_default(j, "dropout", where, nullptr);
  unk_id_ = -1;
  if (find(j, "unk_token")) {
    const std::string unk = string_at(j, "unk_token", where);
    const auto it = vocab_.find(unk);
    if (it == vocab_.end()) fail_input("{}.unk_token '{}' is not in the vocab", where, unk);
    unk_id_ = it->second;
  }
  fuse_unk_ = bool_or(j, "fuse_unk", where, false);
  byte_fallback_ = bool_or(j, "byte_fallback", where, false);
  ignore_merges_ = bool_or(j, "ignore_merges", where, false);
  prefix_ = string_or(j, "continuing_subword_prefix", where, "");
  suffix_ = string_or(j, "end_of_word_suffix", where, "");
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab_.find(fmt::format("<0x{:02X}>", b));
    byte_ids_[b] = byte_fallback_ && it != vocab_.end() ? it->second : -1;
  }
  // (Not with ignore_merges, which looks the whole word up, nor with a prefix or suffix, which
  // depend on where a word begins and ends.)
  if (prefix_.empty() && suffix_.empty() && !ignore_merges_)
    for (const char* mark : {"\xE2\x96\x81", " "})
      if (cut_before_.empty() && only_leading(vocab_, mark)) cut_before_ = mark;
  const Json* merges = find(j, "merges");
  if (!merges || !merges->is_array()) fail_input("{}.merges must be an array", where);
  merges_.reserve(merges->size());
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const auto [left, right] = merge_pair((*merges)[rank], rank, where);
    const auto a = vocab_.find(left), b = vocab_.find(right);
    const std::string joined =
        left +
        (!prefix_.empty() && right.rfind(prefix_, 0) == 0 ? right.substr(prefix_.size()) : right);
    const auto merged = vocab_.find(joined);
    if (a == vocab_.end() || b == vocab_.end() || merged == vocab_.end())
      fail_input("{}.merges[{}] = '{} {}': '{}' is not in the vocab", where, rank, printable(left),
                 printable(right),
                 printable(a == vocab_.end()   ? left
                           : b == vocab_.end() ? right
                                               : joined));
    const uint64_t key = uint64_t(uint32_t(a->second)) << 32 | uint32_t(b->second);
    merges_[key] = Merge{int32_t(rank), merged->second};  // a repeated pair: the last rank, as HF
  }
}

const BpeModel::Merge* BpeModel::find_merge(int32_t left, int32_t right) const {
  const auto it = merges_.find(uint64_t(uint32_t(left)) << 32 | uint32_t(right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::encode(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  if (cut_before_.empty() || word.size() <= kMaxCachedWord) return encode_word(word, ids);
  size_t begin = 0;
  const std::string& mark = cut_before_;
  for (size_t at = word.find(mark, 1); at != std::string_view::npos;
       at = word.find(mark, at + mark.size())) {
    if (at >= mark.size() && word.compare(at - mark.size(), mark.size(), mark) == 0)
      continue;  // inside a run of marks
    encode_word(word.substr(begin, at - begin), ids);
    begin = at;
  }
  encode_word(word.substr(begin), ids);
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.size() > kMaxCachedWord) return encode_uncached(word, ids);
  {
    std::lock_guard lock(cache_mutex_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> part;
  encode_uncached(word, part);
  ids.insert(ids.end(), part.begin(), part.end());
  std::lock_guard lock(cache_mutex_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(std::string(word), std::move(part));
}

void BpeModel::encode_uncached(std::string_view word, std::vector<int32_t>& ids) const {
  if (ignore_merges_) {
    const auto it = vocab_.find(word);
    if (it != vocab_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> symbols;
  int32_t pending_unk = -1;  // an unknown run not yet added (fuse_unk joins neighbours)
  std::string piece;
  for (size_t at = 0; at < word.size();) {
    const size_t begin = at;
    unicode::next_code_point(word, at);
    piece.assign(begin > 0 ? prefix_ : "");
    piece.append(word.substr(begin, at - begin));
    if (at == word.size()) piece += suffix_;
    const auto it = vocab_.find(piece);
    if (it != vocab_.end()) {
      if (pending_unk >= 0) symbols.push_back(pending_unk);
      pending_unk = -1;
      symbols.push_back(it->second);
      continue;
    }
    bool all_bytes = byte_fallback_;
    for (unsigned char b : piece) all_bytes = all_bytes && byte_ids_[b] >= 0;
    if (all_bytes) {
      for (unsigned char b : piece) symbols.push_back(byte_ids_[b]);
      continue;
    }
    if (unk_id_ < 0) continue;  // Hugging Face drops a character it has no token for
    if (pending_unk >= 0 && !fuse_unk_) symbols.push_back(pending_unk);
    pending_unk = unk_id_;
  }
  if (pending_unk >= 0) symbols.push_back(pending_unk);
  merge_all(symbols);
  ids.insert(ids.end(), symbols.begin(), symbols.end());
}

// Merges the lowest-ranked adjacent pair (leftmost on ties) until none is left, as a heap of
// candidate merges over a linked list of symbols.
void BpeModel::merge_all(std::vector<int32_t>& symbols) const {
  const int n = int(symbols.size());
  if (n < 2) return;
  std::vector<int> next(static_cast<size_t>(n)), prev(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    next[size_t(i)] = i + 1 < n ? i + 1 : -1;
    prev[size_t(i)] = i - 1;
  }
  struct Candidate {
    int32_t rank, pos, id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto consider = [&](int left) {
    if (left < 0 || next[size_t(left)] < 0) return;
    if (const Merge* m = find_merge(symbols[size_t(left)], symbols[size_t(next[size_t(left)])]))
      queue.push({m->rank, left, m->id});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  std::vector<bool> gone(size_t(n), false);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    const int right = next[size_t(top.pos)];
    if (gone[size_t(top.pos)] || right < 0) continue;
    const Merge* m = find_merge(symbols[size_t(top.pos)], symbols[size_t(right)]);
    if (!m || m->id != top.id) continue;  // the pair changed since it was queued
    symbols[size_t(top.pos)] = top.id;
    gone[size_t(right)] = true;
    next[size_t(top.pos)] = next[size_t(right)];
    if (next[size_t(right)] >= 0) prev[size_t(next[size_t(right)])] = top.pos;
    consider(prev[size_t(top.pos)]);
    consider(top.pos);
  }
  size_t out = 0;
  for (int i = 0; i >= 0; i = next[size_t(i)]) symbols[out++] = symbols[size_t(i)];
  symbols.resize(out);
}

}  // namespace st

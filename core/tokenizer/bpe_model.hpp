#pragma once
// tokenizer.json's "model" of type BPE: vocab (token -> id), merges in rank order (as "a b"
// strings or ["a", "b"] pairs), unk_token and fuse_unk, byte_fallback (<0xNN> tokens),
// ignore_merges, continuing_subword_prefix and end_of_word_suffix, computed as Hugging Face's
// BPE does: each character (with prefix/suffix) looked up, then the lowest-ranked adjacent pair
// merged, leftmost first on ties, until no pair of the merges is left.
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace st {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIds = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  BpeModel(const nlohmann::json& j, const std::string& where);

  // Appends the ids of one pre-token.
  void encode(std::string_view word, std::vector<int32_t>& ids) const;
  const TokenIds& vocab() const { return vocab_; }
  const std::string& end_of_word_suffix() const { return suffix_; }

 private:
  struct Merge {
    int32_t rank, id;
  };
  void encode_word(std::string_view word, std::vector<int32_t>& ids) const;
  void encode_uncached(std::string_view word, std::vector<int32_t>& ids) const;
  void merge_all(std::vector<int32_t>& symbols) const;
  const Merge* find_merge(int32_t left, int32_t right) const;

  TokenIds vocab_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> rank, merged id
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  std::string prefix_, suffix_;
  int32_t byte_ids_[256];  // <0xNN> when byte_fallback, else -1
  // A character no merge reaches across from the left (SentencePiece's "▁" when every token
  // holding it holds it only at its start): a long word is cut before each one that follows
  // another character, and the parts encoded (and cached) alone, with the same ids.
  std::string cut_before_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace st

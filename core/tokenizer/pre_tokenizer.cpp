#include "core/tokenizer/pre_tokenizer.hpp"

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "core/tokenizer/json_fields.hpp"
#include "core/tokenizer/pattern.hpp"
#include "core/tokenizer/unicode.hpp"

namespace st {
namespace {

using namespace tokenizer_json;

enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

struct Part {
  size_t begin, end;
  bool match;
};

// Cuts `text` at `matches` as Hugging Face's NormalizedString::split does with `behavior`.
void split_at(std::string_view text, const std::vector<Span>& matches, Behavior behavior,
              bool invert, const PreTokenizer::Emit& emit) {
  std::vector<Part> parts;
  size_t at = 0;
  for (const Span& m : matches) {
    if (m.begin > at) parts.push_back({at, m.begin, invert});
    parts.push_back({m.begin, m.end, !invert});
    at = m.end;
  }
  if (at < text.size()) parts.push_back({at, text.size(), invert});
  std::vector<Part> out;
  bool previous = false;
  if (behavior == Behavior::merged_with_next) std::reverse(parts.begin(), parts.end());
  for (const Part& p : parts) {
    const bool merge =
        !out.empty() &&
        ((behavior == Behavior::contiguous && p.match == previous) ||
         ((behavior == Behavior::merged_with_previous || behavior == Behavior::merged_with_next) &&
          p.match && !previous));
    if (behavior == Behavior::removed && p.match) {
      // dropped
    } else if (!merge) {
      out.push_back(p);
    } else if (behavior == Behavior::merged_with_next) {
      out.back().begin = p.begin;
    } else {
      out.back().end = p.end;
    }
    previous = p.match;
  }
  if (behavior == Behavior::merged_with_next) std::reverse(out.begin(), out.end());
  for (const Part& p : out)
    if (p.end > p.begin) emit(text.substr(p.begin, p.end - p.begin));
}

Behavior read_behavior(const Json& j, const std::string& where) {
  const std::string name = string_at(j, "behavior", where);
  if (name == "Removed") return Behavior::removed;
  if (name == "Isolated") return Behavior::isolated;
  if (name == "MergedWithPrevious") return Behavior::merged_with_previous;
  if (name == "MergedWithNext") return Behavior::merged_with_next;
  if (name == "Contiguous") return Behavior::contiguous;
  fail_input(
      "{}.behavior = '{}' is not a split behaviour (Removed, Isolated, MergedWithPrevious, "
      "MergedWithNext, Contiguous)",
      where, name);
}

// GPT-2's pattern (contractions, letter runs, number runs, other runs, whitespace), in
// Oniguruma's syntax as Hugging Face's ByteLevel uses it.
constexpr const char* kByteLevelPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(const Json& j, const std::string& where)
      : add_prefix_space_(bool_or(j, "add_prefix_space", where, false)),
        use_regex_(bool_or(j, "use_regex", where, true)) {
    bool_or(j, "trim_offsets", where, false);  // offsets only: no effect on ids
    if (use_regex_) pattern_ = std::make_unique<Pattern>(Pattern::regex(kByteLevelPattern, where));
  }
  void split(std::string_view text, bool, const Emit& emit) const override {
    std::string prefixed;
    if (add_prefix_space_ && (text.empty() || text.front() != ' ')) {
      prefixed.reserve(text.size() + 1);
      prefixed.push_back(' ');  // (not " " + string: GCC 12's -Wrestrict false positive)
      prefixed.append(text);
      text = prefixed;
    }
    std::string mapped;
    const auto map = [&](std::string_view piece) {
      mapped.clear();
      for (unsigned char b : piece)
        unicode::append_utf8(mapped, unicode::byte_level_code_points()[b]);
      emit(mapped);
    };
    if (use_regex_)
      split_at(text, pattern_->find_all(text), Behavior::isolated, false, map);
    else if (!text.empty())
      map(text);
  }

 private:
  bool add_prefix_space_, use_regex_;
  std::unique_ptr<Pattern> pattern_;
};

class Split final : public PreTokenizer {
 public:
  Split(const Json& j, const std::string& where)
      : pattern_(read_pattern(j, where)),
        behavior_(read_behavior(j, where)),
        invert_(bool_or(j, "invert", where, false)) {}
  void split(std::string_view text, bool, const Emit& emit) const override {
    split_at(text, pattern_.find_all(text), behavior_, invert_, emit);
  }

 private:
  Pattern pattern_;
  Behavior behavior_;
  bool invert_;
};

class Digits final : public PreTokenizer {
 public:
  Digits(const Json& j, const std::string& where)
      : individual_(bool_or(j, "individual_digits", where, false)) {}
  void split(std::string_view text, bool, const Emit& emit) const override {
    std::vector<Span> digits;
    for (size_t at = 0; at < text.size();) {
      const size_t begin = at;
      if (unicode::is_numeric(unicode::next_code_point(text, at))) digits.push_back({begin, at});
    }
    split_at(text, digits, individual_ ? Behavior::isolated : Behavior::contiguous, false, emit);
  }

 private:
  bool individual_;
};

class Metaspace final : public PreTokenizer {
 public:
  enum class Prepend { always, first, never };
  Metaspace(const Json& j, const std::string& where)
      : replacement_(string_or(j, "replacement", where, "\xE2\x96\x81")),
        split_(bool_or(j, "split", where, true)) {
    if (unicode::first_invalid_utf8(replacement_) != replacement_.size() || replacement_.empty())
      fail_input("{}.replacement must be one character", where);
    size_t end = 0;
    unicode::next_code_point(replacement_, end);
    if (end != replacement_.size()) fail_input("{}.replacement must be one character", where);
    if (find(j, "prepend_scheme")) {
      const std::string scheme = string_at(j, "prepend_scheme", where);
      if (scheme == "always")
        prepend_ = Prepend::always;
      else if (scheme == "first")
        prepend_ = Prepend::first;
      else if (scheme == "never")
        prepend_ = Prepend::never;
      else
        fail_input("{}.prepend_scheme = '{}' must be always, first or never", where, scheme);
    } else {  // the older form
      prepend_ = bool_or(j, "add_prefix_space", where, true) ? Prepend::always : Prepend::never;
    }
  }
  void split(std::string_view text, bool first, const Emit& emit) const override {
    std::string replaced;
    const bool prepend = prepend_ == Prepend::always || (prepend_ == Prepend::first && first);
    if (prepend && text.substr(0, replacement_.size()) != replacement_ && text.substr(0, 1) != " ")
      replaced = replacement_;
    for (char c : text) {
      if (c == ' ')
        replaced += replacement_;
      else
        replaced += c;
    }
    if (!split_) {
      if (!replaced.empty()) emit(replaced);
      return;
    }
    std::vector<Span> marks;
    for (size_t at = replaced.find(replacement_); at != std::string::npos;
         at = replaced.find(replacement_, at + replacement_.size()))
      marks.push_back({at, at + replacement_.size()});
    split_at(replaced, marks, Behavior::merged_with_next, false, emit);
  }

 private:
  std::string replacement_;
  bool split_;
  Prepend prepend_ = Prepend::always;
};

class Sequence final : public PreTokenizer {
 public:
  Sequence(const Json& j, const std::string& where) {
    const Json* list = find(j, "pretokenizers");
    if (!list || !list->is_array()) fail_input("{}.pretokenizers must be an array", where);
    for (size_t i = 0; i < list->size(); ++i) {
      auto stage = make_pre_tokenizer((*list)[i], fmt::format("{}.pretokenizers[{}]", where, i));
      if (stage) stages_.push_back(std::move(stage));
    }
  }
  void split(std::string_view text, bool first, const Emit& emit) const override {
    run(0, text, first, emit);
  }

 private:
  void run(size_t stage, std::string_view text, bool first, const Emit& emit) const {
    if (stage == stages_.size()) {
      emit(text);
      return;
    }
    bool is_first = first;  // only the first piece of a first text begins the input
    stages_[stage]->split(text, first, [&](std::string_view piece) {
      run(stage + 1, piece, is_first, emit);
      is_first = false;
    });
  }
  std::vector<std::unique_ptr<PreTokenizer>> stages_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j,
                                                 const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = type_of(j, where);
  if (type == "ByteLevel") return std::make_unique<ByteLevel>(j, where);
  if (type == "Split") return std::make_unique<Split>(j, where);
  if (type == "Digits") return std::make_unique<Digits>(j, where);
  if (type == "Metaspace") return std::make_unique<Metaspace>(j, where);
  if (type == "Sequence") return std::make_unique<Sequence>(j, where);
  unsupported(where, type, "ByteLevel, Split, Digits, Metaspace, Sequence");
}

}  // namespace st

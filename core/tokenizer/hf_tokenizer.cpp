#include "core/tokenizer/hf_tokenizer.hpp"

#include <sys/stat.h>
#include <algorithm>

#include <filesystem>
#include <optional>
#include <set>
#include <unordered_map>

#include "core/data/tokenizer.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/json_parse.hpp"
#include "core/tokenizer/added_tokens.hpp"
#include "core/tokenizer/bpe_model.hpp"
#include "core/tokenizer/decoder.hpp"
#include "core/tokenizer/json_fields.hpp"
#include "core/tokenizer/normalizer.hpp"
#include "core/tokenizer/post_processor.hpp"
#include "core/tokenizer/pre_tokenizer.hpp"
#include "core/tokenizer/unicode.hpp"

namespace st {

using namespace tokenizer_json;
namespace fs = std::filesystem;

constexpr const char* kTokenizerJson = "tokenizer.json";
constexpr const char* kTokenizerConfig = "tokenizer_config.json";
constexpr uint64_t kMaxTokenizerBytes = uint64_t(512) << 20;
constexpr int64_t kMaxTokenId = int64_t(1) << 24;

struct HfTokenizer::Impl {
  std::string json_path, folder;
  std::optional<BpeModel> model;
  Normalize normalize;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  DecodeChain decoder;
  AddedTokenMatcher raw_tokens, normalized_tokens;
  // Held by id, not indexed: ids need not be dense (the test fixtures, real files cut down to
  // what their texts use, keep the real ids), so memory goes with the entries, not the ids.
  std::unordered_map<int32_t, std::string> id_to_token;
  int64_t size = 0;  // one more than the largest id
  SectionTokens sections;

  void encode_plain(std::string_view text, bool first, std::vector<int32_t>& ids) const {
    if (!pre_tokenizer) return model->encode(text, ids);
    pre_tokenizer->split(text, first, [&](std::string_view piece) { model->encode(piece, ids); });
  }

  // id -> token string over the vocabulary and the added tokens (which win, as in Hugging Face).
  void index_ids(const std::vector<AddedToken>& added) {
    check_id_bound(added);
    id_to_token.reserve(model->vocab().size() + added.size());
    for (const auto& [token, id] : model->vocab()) {
      id_to_token[id] = token;
      size = std::max<int64_t>(size, id + 1);
    }
    for (const AddedToken& t : added) {
      id_to_token[t.id] = t.content;
      size = std::max<int64_t>(size, t.id + 1);
    }
  }

  // An id far beyond any real vocabulary (10^9, where the largest hold about 262,144) is a
  // damaged or hand-made file, refused naming the token: it would size a model's embedding.
  void check_id_bound(const std::vector<AddedToken>& added) const {
    const auto refuse = [&](const std::string& what, int64_t id) {
      fail_input(
          "{}: {} has id {}, beyond any real vocabulary: token ids must be below {} (2^24; "
          "this file holds {} entries)",
          json_path, what, id, kMaxTokenId, model->vocab().size() + added.size());
    };
    const auto top = std::max_element(
        model->vocab().begin(), model->vocab().end(),
        [](const auto& a, const auto& b) { return a.second < b.second; });  // ids are unique
    if (top->second >= kMaxTokenId)
      refuse(fmt::format("model.vocab['{}']", printable(top->first)), top->second);
    for (size_t i = 0; i < added.size(); ++i)
      if (added[i].id >= kMaxTokenId)
        refuse(fmt::format("added_tokens[{}] '{}'", i, printable(added[i].content)), added[i].id);
  }
};

HfTokenizer::HfTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HfTokenizer::~HfTokenizer() = default;
HfTokenizer::HfTokenizer(HfTokenizer&&) noexcept = default;
HfTokenizer& HfTokenizer::operator=(HfTokenizer&&) noexcept = default;

namespace {

// tokenizer.json and its folder from a path naming either.
std::pair<std::string, std::string> locate(const std::string& path) {
  if (fs::is_directory(path)) {
    const std::string file = (fs::path(path) / kTokenizerJson).string();
    if (!fs::exists(file)) fail_input("tokenizer '{}' is a folder without a tokenizer.json", path);
    return {file, path};  // one that is not a regular file is refused by read_json
  }
  if (!fs::exists(path))
    fail_input(
        "tokenizer '{}' does not exist (give a tokenizer.json or a model folder holding one)",
        path);
  const std::string folder = fs::path(path).parent_path().string();
  return {path, folder.empty() ? "." : folder};
}

nlohmann::json read_json(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    fail_input("tokenizer file '{}' is {}, not a regular file", path, file_type_name(st.st_mode));
  const uint64_t size = fs::file_size(path);
  if (size > kMaxTokenizerBytes)
    fail_input("'{}' is {} MiB; a tokenizer file this reader takes is at most {} MiB", path,
               size >> 20, kMaxTokenizerBytes >> 20);
  return parse_json_object(read_regular_text_file(path), fmt::format("'{}'", path));
}

void check_top_level(const Json& j, const std::string& file) {
  static const std::set<std::string> known = {"version",        "truncation", "padding",
                                              "added_tokens",   "normalizer", "pre_tokenizer",
                                              "post_processor", "decoder",    "model"};
  for (const auto& [key, value] : j.items())
    if (!known.count(key))
      fail_input(
          "{}: the key '{}' is not one tokenizer.json has (known: version, truncation, "
          "padding, added_tokens, normalizer, pre_tokenizer, post_processor, decoder, model)",
          file, key);
  const Json* model = find(j, "model");
  if (!model || !model->is_object()) fail_input("{}: model must be an object", file);
  const std::string type = string_or(*model, "type", file + ": model", "BPE");
  if (type != "BPE") unsupported(file + ": model", type, "BPE");
}

}  // namespace

HfTokenizer HfTokenizer::load(const std::string& path) {
  const auto [file, folder] = locate(path);
  const std::string config_path = (fs::path(folder) / kTokenizerConfig).string();
  return from_json(read_json(file), file,
                   fs::exists(config_path) ? read_json(config_path) : Json::object(), config_path);
}

HfTokenizer HfTokenizer::from_json(const nlohmann::json& j, const std::string& file,
                                   const nlohmann::json& config, const std::string& config_path) {
  auto impl = std::make_unique<Impl>();
  impl->json_path = file;
  impl->folder = fs::path(config_path).parent_path().string();
  check_top_level(j, file);
  impl->model.emplace(j["model"], file + ": model");
  const auto at = [&](const char* key) { return find(j, key) ? j[key] : Json(); };
  impl->normalize = make_normalizer(at("normalizer"), file + ": normalizer");
  impl->pre_tokenizer = make_pre_tokenizer(at("pre_tokenizer"), file + ": pre_tokenizer");
  impl->decoder = make_decoder(at("decoder"), file + ": decoder");
  std::vector<AddedToken> added = read_added_tokens(at("added_tokens"), file + ": added_tokens");
  impl->index_ids(added);
  std::vector<AddedToken> raw, normalized;
  for (AddedToken& t : added) {
    if (t.normalized && impl->normalize) {
      t.content = impl->normalize(t.content);
      if (t.content.empty()) continue;
      normalized.push_back(t);
    } else {
      raw.push_back(t);
    }
  }
  impl->raw_tokens = AddedTokenMatcher(std::move(raw));
  impl->normalized_tokens = AddedTokenMatcher(std::move(normalized));
  const auto id_of = [&impl](const std::string& token) -> std::optional<int32_t> {
    const auto it = impl->model->vocab().find(token);
    if (it != impl->model->vocab().end()) return it->second;
    std::optional<int32_t> found;  // (not in the vocab: an added token) its lowest id
    for (const auto& [id, text] : impl->id_to_token)
      if (text == token && (!found || id < *found)) found = id;
    return found;
  };
  impl->sections =
      section_tokens(at("post_processor"), file + ": post_processor", config, config_path, id_of);
  return HfTokenizer(std::move(impl));
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text) const {
  const size_t bad = unicode::first_invalid_utf8(text);
  if (bad != text.size())
    fail_input("the text is not UTF-8 at byte {} (tokenizer.json tokenizers read Unicode text)",
               bad);
  std::vector<int32_t> ids;
  const Impl& m = *impl_;
  for (const Segment& raw : m.raw_tokens.split(text)) {
    if (raw.token >= 0) {
      ids.push_back(raw.token);
      continue;
    }
    const bool first = raw.text.data() == text.data();
    if (!m.normalize) {
      m.encode_plain(raw.text, first, ids);
      continue;
    }
    const std::string normalized = m.normalize(std::string(raw.text));
    if (m.normalized_tokens.empty()) {
      m.encode_plain(normalized, first, ids);
      continue;
    }
    for (const Segment& part : m.normalized_tokens.split(normalized)) {
      if (part.token >= 0)
        ids.push_back(part.token);
      else
        m.encode_plain(part.text, first && part.text.data() == normalized.data(), ids);
    }
  }
  return ids;
}

std::string HfTokenizer::decode(const int32_t* ids, size_t n) const {
  std::vector<std::string> tokens;
  tokens.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (const auto it = impl_->id_to_token.find(ids[i]); it != impl_->id_to_token.end())
      tokens.push_back(it->second);
  std::string text;
  if (!impl_->decoder) {
    for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
    return text;
  }
  for (const std::string& part : impl_->decoder(std::move(tokens))) text += part;
  return text;
}

int64_t HfTokenizer::vocab_size() const {
  return impl_->size;
}
const std::string& HfTokenizer::json_path() const {
  return impl_->json_path;
}
const std::vector<int32_t>& HfTokenizer::section_prefix() const {
  return impl_->sections.prefix;
}
const std::vector<int32_t>& HfTokenizer::section_suffix() const {
  return impl_->sections.suffix;
}

std::vector<std::string> HfTokenizer::files() const {
  std::vector<std::string> out = {impl_->json_path};
  for (const char* name : {kTokenizerConfig, "special_tokens_map.json"}) {
    const std::string path = (fs::path(impl_->folder) / name).string();
    if (fs::is_regular_file(path)) out.push_back(path);
  }
  return out;
}

std::vector<int32_t> encode_sections(const HfTokenizer& tokenizer, std::string_view text) {
  if (tokenizer.section_prefix().empty() && tokenizer.section_suffix().empty())
    fail_input(
        "--sections: tokenizer '{}' names no token to put between sections (no post-processor "
        "template, no bos_token in tokenizer_config.json, no <|endoftext|>)",
        tokenizer.json_path());
  std::vector<int32_t> ids;
  for (const std::string& section : text_sections(text)) {
    ids.insert(ids.end(), tokenizer.section_prefix().begin(), tokenizer.section_prefix().end());
    const auto part = tokenizer.encode(section);
    ids.insert(ids.end(), part.begin(), part.end());
    ids.insert(ids.end(), tokenizer.section_suffix().begin(), tokenizer.section_suffix().end());
  }
  return ids;
}

}  // namespace st

#include "core/tokenizer/unicode.hpp"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/error.hpp"

namespace st::unicode {

char32_t next_code_point(std::string_view text, size_t& at) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) {
    ++at;
    return lead;
  }
  const size_t len = lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
  char32_t cp = lead & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
  for (size_t i = 1; i < len; ++i) cp = (cp << 6) | (byte(at + i) & 0x3f);
  at += len;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xc0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += char(0xe0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xf0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3f));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  }
}

namespace {

// The length of the well-formed sequence at text[at] (1-4), or 0 when none starts there; `valid`
// reports how many leading bytes are a valid prefix (for from_utf8_lossy's maximal parts).
size_t sequence_length(std::string_view text, size_t at, size_t& valid_prefix) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  valid_prefix = 0;
  if (lead < 0x80) return 1;
  size_t len = 0;
  unsigned char low = 0x80, high = 0xbf;  // the second byte's range (Unicode table 3-7)
  if (lead >= 0xc2 && lead <= 0xdf) {
    len = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    len = 3;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    len = 4;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  valid_prefix = 1;
  for (size_t i = 1; i < len; ++i) {
    if (at + i >= text.size()) return 0;
    const unsigned char c = byte(at + i);
    if (i == 1 ? (c < low || c > high) : (c < 0x80 || c > 0xbf)) return 0;
    ++valid_prefix;
  }
  return len;
}

}  // namespace

size_t first_invalid_utf8(std::string_view text) {
  size_t at = 0, prefix = 0;
  while (at < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[at]);
    if (c < 0x80) {
      ++at;
      continue;
    }
    const size_t len = sequence_length(text, at, prefix);
    if (len == 0) return at;
    at += len;
  }
  return text.size();
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t at = 0, prefix = 0;
  while (at < bytes.size()) {
    const size_t len = sequence_length(bytes, at, prefix);
    if (len > 0) {
      out.append(bytes.substr(at, len));
      at += len;
    } else {
      out += "\xEF\xBF\xBD";
      at += prefix > 0 ? prefix : 1;
    }
  }
  return out;
}

bool is_whitespace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
         cp == 0x205f || cp == 0x3000;
}

bool is_numeric(char32_t cp) {
  const auto category = utf8proc_category(utf8proc_int32_t(cp));
  return category == UTF8PROC_CATEGORY_ND || category == UTF8PROC_CATEGORY_NL ||
         category == UTF8PROC_CATEGORY_NO;
}

bool is_alphanumeric(char32_t cp) {
  const auto category = utf8proc_category(utf8proc_int32_t(cp));
  return (category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_LO) || is_numeric(cp);
}

std::string normalize(std::string_view text, Form form) {
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(text);  // every form leaves ASCII as it is
  int options = UTF8PROC_STABLE;
  if (form == Form::nfc || form == Form::nfkc) options |= UTF8PROC_COMPOSE;
  if (form == Form::nfd || form == Form::nfkd) options |= UTF8PROC_DECOMPOSE;
  if (form == Form::nfkc || form == Form::nfkd) options |= UTF8PROC_COMPAT;
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                              utf8proc_ssize_t(text.size()), &out, utf8proc_option_t(options));
  if (n < 0) fail("utf8proc: {}", utf8proc_errmsg(n));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  return std::string(reinterpret_cast<const char*>(out), size_t(n));
}

std::string lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const char32_t cp = next_code_point(text, at);
    if (cp == 0x130) {  // the one unconditional multi-character lowercase mapping
      out += "i\xCC\x87";
      continue;
    }
    append_utf8(out, char32_t(utf8proc_tolower(utf8proc_int32_t(cp))));
  }
  return out;
}

const std::array<char32_t, 256>& byte_level_code_points() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> cp{};
    char32_t next = 256;
    for (char32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      cp[b] = printable ? b : next++;
    }
    return cp;
  }();
  return table;
}

int byte_of_level_code_point(char32_t cp) {
  static const std::array<int, 324> inverse = [] {
    std::array<int, 324> table{};
    table.fill(-1);
    const auto& forward = byte_level_code_points();
    for (int b = 0; b < 256; ++b) table[forward[size_t(b)]] = b;
    return table;
  }();
  return cp < inverse.size() ? inverse[cp] : -1;
}

}  // namespace st::unicode

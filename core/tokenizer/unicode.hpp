#pragma once
// What a tokenizer needs of Unicode: UTF-8 walking and checking, the White_Space property, the
// general categories (utf8proc's tables), normalization forms (utf8proc) and lowercasing as
// Rust's char::to_lowercase does, and GPT-2's byte-level alphabet.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace st::unicode {

// The code point starting at text[at], advancing `at` past it. The text must be valid UTF-8.
char32_t next_code_point(std::string_view text, size_t& at);
void append_utf8(std::string& out, char32_t cp);
// The offset of the first byte that does not start a well-formed UTF-8 sequence (overlong forms,
// surrogates and code points above U+10FFFF included), or text.size() when it is all valid.
size_t first_invalid_utf8(std::string_view text);
// Invalid sequences replaced by U+FFFD, each maximal invalid part once (Rust's from_utf8_lossy).
std::string utf8_lossy(std::string_view bytes);

bool is_whitespace(char32_t cp);    // the White_Space property (Rust's char::is_whitespace)
bool is_numeric(char32_t cp);       // categories Nd, Nl, No (Rust's char::is_numeric)
bool is_alphanumeric(char32_t cp);  // letters and numbers (a word character for single_word)

enum class Form { nfc, nfd, nfkc, nfkd };
std::string normalize(std::string_view text, Form form);
std::string lowercase(std::string_view text);

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the other 68 are shifted to
// code points 256 and up, so every byte is a visible character in vocabulary files.
const std::array<char32_t, 256>& byte_level_code_points();
// 256..: the byte a byte-level character stands for, or -1.
int byte_of_level_code_point(char32_t cp);

}  // namespace st::unicode

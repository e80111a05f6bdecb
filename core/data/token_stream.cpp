#include "core/data/token_stream.hpp"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/file_io.hpp"

namespace st {

const char* token_format_name(TokenFormat format) {
  switch (format) {
    case TokenFormat::automatic:
      return "auto";
    case TokenFormat::llmc:
      return "llmc";
    case TokenFormat::u16:
      return "u16";
    case TokenFormat::u32:
      return "u32";
  }
  return "?";
}

// One file read with pread (uint16 or uint32 tokens after `header_bytes`) or one vector owned
// (int32). Files are read, not memory-mapped: a mapped file that shrinks under a run (rewritten,
// truncated) kills the process with SIGBUS where it is touched, while a short read is an error
// that names the file.
struct TokenStream::Storage {
  struct Segment {
    std::string path;
    int64_t first = 0, count = 0;  // global index of its first token, tokens held
    const int32_t* i32 = nullptr;  // owned ids, else the file's
    int fd = -1;
    int64_t file_bytes = 0, header_bytes = 0, token_bytes = 2;
  };
  std::vector<Segment> segments;
  std::vector<int32_t> owned;

  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    for (const Segment& s : segments)
      if (s.fd >= 0) ::close(s.fd);
  }
  const Segment& segment_of(int64_t index) const {
    auto it = std::upper_bound(segments.begin(), segments.end(), index,
                               [](int64_t i, const Segment& s) { return i < s.first; });
    return *(it - 1);
  }
};

namespace {

// Opens `path` for reading; the segment's tokens are set by the caller.
TokenStream::Storage::Segment open_file(const std::string& path) {
  TokenStream::Storage::Segment s;
  s.path = path;
  s.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (s.fd < 0) fail_input("cannot open token file '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(s.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(s.fd);
    fail_input("token file '{}' is not a regular file", path);
  }
  s.file_bytes = int64_t(st.st_size);
  return s;
}

// Up to `n` bytes at `offset`; fewer only at the end of the file.
int64_t read_at(const TokenStream::Storage::Segment& s, void* out, int64_t n, int64_t offset) {
  int64_t done = 0;
  while (done < n) {
    const ssize_t got =
        ::pread(s.fd, static_cast<char*>(out) + done, size_t(n - done), off_t(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail_io(errno, "reading token file '{}': {}", s.path, std::strerror(errno));
    if (got == 0) break;
    done += got;
  }
  return done;
}

// Exactly `n` bytes at `offset`: a file shorter now than when it was opened is named.
void read_exactly(const TokenStream::Storage::Segment& s, void* out, int64_t n, int64_t offset) {
  if (read_at(s, out, n, offset) == n) return;
  struct stat st {};
  const int64_t now = ::fstat(s.fd, &st) == 0 ? int64_t(st.st_size) : -1;
  fail_input(
      "token file '{}' shrank while in use: it had {} bytes when opened and has {} now, too few "
      "for bytes {}..{} (was it truncated or rewritten during the run?)",
      s.path, s.file_bytes, now, offset, offset + n);
}

int32_t read_le_i32(const unsigned char* p) {
  return int32_t(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
                 uint32_t(p[3]) << 24);
}

}  // namespace

namespace {

bool is_llmc_magic(int32_t magic) {
  return magic == kLlmcMagic || magic == kLlmcMagicU32;
}

// llm.c's header: the magic says the token width, which the version must match.
TokenFileLayout llmc_layout(const std::string& path, const unsigned char* bytes, int64_t size) {
  const int64_t header = kLlmcHeaderInts * 4;
  if (size < 4 || !is_llmc_magic(read_le_i32(bytes)))
    fail_input(
        "token file '{}' does not start with llm.c's magic {} (uint16) or {} (uint32) "
        "(data.token_format = llmc)",
        path, kLlmcMagic, kLlmcMagicU32);
  if (size < header)
    fail_input("token file '{}' is truncated: {} bytes, shorter than llm.c's {}-byte header", path,
               size, header);
  const bool wide = read_le_i32(bytes) == kLlmcMagicU32;
  const int32_t want = wide ? kLlmcVersionU32 : kLlmcVersion;
  const int32_t version = read_le_i32(bytes + 4);
  if (version != want)
    fail_input("token file '{}' has version {}; magic {} means version {} ({} tokens)", path,
               version, read_le_i32(bytes), want, wide ? "uint32" : "uint16");
  const int64_t width = wide ? 4 : 2;
  const int32_t count = read_le_i32(bytes + 8);
  const int64_t held = (size - header) / width;
  if (count < 0 || count > held)
    fail_input("token file '{}' claims {} tokens but its {} bytes hold {}", path, count, size,
               held);
  if (count < held || (size - header) % width != 0)
    fail_input("token file '{}' has {} bytes after its {} tokens (trailing data or a wrong count)",
               path, size - header - width * int64_t(count), count);
  return {header, count, width};
}

// The little-endian id at `i` (bytes need not be aligned).
int64_t token_at(const unsigned char* tokens, int64_t width, int64_t i) {
  const unsigned char* p = tokens + width * i;
  return width == 2 ? int64_t(p[0] | p[1] << 8) : int64_t(uint32_t(read_le_i32(p)));
}

}  // namespace

namespace {

// A token file's layout for `format` from its size and first bytes (`head`: at least the first
// min(size, 1024)). `guess` gets what the messages about its ids add in auto mode.
TokenFileLayout token_layout(const std::string& path, const unsigned char* head, int64_t size,
                             TokenFormat format, std::string& guess) {
  // A file without llm.c's magic read as raw ids in auto mode: if ids then fail, the magic (the
  // format) is the likelier fault, and the message says so.
  const bool guessed_raw =
      format == TokenFormat::automatic && !(size >= 4 && is_llmc_magic(read_le_i32(head)));
  if (format == TokenFormat::automatic) format = guessed_raw ? TokenFormat::u16 : TokenFormat::llmc;
  guess = guessed_raw ? fmt::format(
                            " (it does not start with llm.c's magic {}, so data.token_format = "
                            "auto read it as raw uint16 ids: a damaged llm.c header, raw uint32 "
                            "ids (data.token_format = u32), or not a token file?)",
                            kLlmcMagic)
                      : std::string();
  TokenFileLayout layout;
  if (format == TokenFormat::llmc) {
    layout = llmc_layout(path, head, size);
  } else {
    const int64_t width = format == TokenFormat::u32 ? 4 : 2;
    if (size % width != 0)
      fail_input(
          "token file '{}' has {} bytes, not a multiple of {}: raw uint{} tokens take {} bytes "
          "each{}",
          path, size, width, 8 * width, width, guess);
    layout = {0, size / width, width};
  }
  if (layout.count == 0) fail_input("token file '{}' holds no tokens", path);
  return layout;
}

// The index of the first of `count` ids (`width` bytes each) at or above `vocab_size`, else
// `count`.
int64_t first_id_beyond(const unsigned char* tokens, int64_t width, int64_t count,
                        int64_t vocab_size) {
  int64_t first_bad = count;
#pragma omp parallel for reduction(min : first_bad) schedule(static) if (count > (1 << 20))
  for (int64_t i = 0; i < count; ++i)
    if (token_at(tokens, width, i) >= vocab_size && i < first_bad) first_bad = i;
  return first_bad;
}

[[noreturn]] void id_beyond(const std::string& path, const TokenFileLayout& layout, int64_t index,
                            int64_t id, int64_t vocab_size, const std::string& guess) {
  fail_input(
      "token file '{}': token {} (byte offset {}) is id {}, not below model.vocab_size = {}{}",
      path, index, layout.header_bytes + layout.token_bytes * index, id, vocab_size, guess);
}

// Checks an open file as inspect_token_file does, reading it in pieces.
TokenFileLayout inspect_open_file(const TokenStream::Storage::Segment& s, TokenFormat format,
                                  int64_t vocab_size) {
  const int64_t head_bytes = std::min<int64_t>(s.file_bytes, kLlmcHeaderInts * 4);
  std::vector<unsigned char> buf(size_t(std::max<int64_t>(head_bytes, 1)));
  read_exactly(s, buf.data(), head_bytes, 0);
  std::string guess;
  const TokenFileLayout layout = token_layout(s.path, buf.data(), s.file_bytes, format, guess);
  const int64_t chunk = int64_t(1) << 22;  // tokens a read checks
  buf.resize(size_t(std::min(chunk, layout.count) * layout.token_bytes));
  for (int64_t first = 0; first < layout.count; first += chunk) {
    const int64_t n = std::min(chunk, layout.count - first);
    read_exactly(s, buf.data(), n * layout.token_bytes,
                 layout.header_bytes + first * layout.token_bytes);
    const int64_t bad = first_id_beyond(buf.data(), layout.token_bytes, n, vocab_size);
    if (bad < n)
      id_beyond(s.path, layout, first + bad, token_at(buf.data(), layout.token_bytes, bad),
                vocab_size, guess);
  }
  return layout;
}

}  // namespace

TokenFileLayout inspect_token_file(const std::string& path, const unsigned char* bytes,
                                   int64_t size, TokenFormat format, int64_t vocab_size) {
  std::string guess;
  const TokenFileLayout layout = token_layout(path, bytes, size, format, guess);
  const unsigned char* tokens = bytes + layout.header_bytes;
  const int64_t bad = first_id_beyond(tokens, layout.token_bytes, layout.count, vocab_size);
  if (bad < layout.count)
    id_beyond(path, layout, bad, token_at(tokens, layout.token_bytes, bad), vocab_size, guess);
  return layout;
}

TokenStream TokenStream::in_memory(std::string source, std::vector<int32_t> tokens) {
  auto storage = std::make_shared<Storage>();
  storage->owned = std::move(tokens);
  Storage::Segment s;
  s.path = source;
  s.count = int64_t(storage->owned.size());
  s.i32 = storage->owned.data();
  storage->segments.push_back(std::move(s));
  TokenStream t;
  t.size_ = int64_t(storage->owned.size());
  t.storage_ = std::move(storage);
  t.source_ = std::move(source);
  return t;
}

TokenStream TokenStream::from_files(const std::vector<std::string>& paths, TokenFormat format,
                                    int64_t vocab_size) {
  ST_CHECK(!paths.empty(), "no token files");
  auto storage = std::make_shared<Storage>();
  int64_t total = 0;
  for (const std::string& path : paths) {
    storage->segments.push_back(open_file(path));
    Storage::Segment& s = storage->segments.back();
    const TokenFileLayout layout = inspect_open_file(s, format, vocab_size);
    s.header_bytes = layout.header_bytes;
    s.token_bytes = layout.token_bytes;
    s.count = layout.count;
    s.first = total;
    total += s.count;
  }
  TokenStream t;
  t.size_ = total;
  t.storage_ = std::move(storage);
  t.source_ =
      paths.size() == 1 ? paths[0] : fmt::format("{} token files ({} ...)", paths.size(), paths[0]);
  return t;
}

int32_t TokenStream::at(int64_t index) const {
  int32_t v;
  read(index, 1, &v);
  return v;
}

void TokenStream::read(int64_t begin, int64_t count, int32_t* out) const {
  ST_CHECK(begin >= 0 && count >= 0 && begin + count <= size_,
           "tokens [{}, {}) outside a stream of {}", begin, begin + count, size_);
  int64_t g = begin_ + begin;
  while (count > 0) {
    const Storage::Segment& s = storage_->segment_of(g);
    const int64_t local = g - s.first;
    const int64_t n = std::min(count, s.count - local);
    if (s.i32) {
      std::memcpy(out, s.i32 + local, size_t(n) * 4);
    } else {
      // Read into `out` itself: uint32 ids (checked below vocab_size, which fits int32) are
      // its int32s already; uint16 ones, in its first half, widen from the last down, each
      // written at or past where it was read.
      static_assert(std::endian::native == std::endian::little, "token files are little-endian");
      read_exactly(s, out, n * s.token_bytes, s.header_bytes + local * s.token_bytes);
      if (s.token_bytes == 2) {
        const auto* bytes = reinterpret_cast<const unsigned char*>(out);
        for (int64_t i = n - 1; i >= 0; --i) {
          uint16_t v;
          std::memcpy(&v, bytes + 2 * i, 2);
          out[i] = int32_t(v);
        }
      }
    }
    out += n;
    g += n;
    count -= n;
  }
}

TokenStream TokenStream::slice(int64_t begin, int64_t end) const {
  ST_CHECK(0 <= begin && begin <= end && end <= size_, "slice [{}, {}) of {}", begin, end, size_);
  TokenStream t = *this;
  t.begin_ = begin_ + begin;
  t.size_ = end - begin;
  return t;
}

std::vector<int32_t> TokenStream::to_vector() const {
  std::vector<int32_t> v(static_cast<size_t>(size_));
  if (size_ > 0) read(0, size_, v.data());
  return v;
}

bool llmc_needs_u32(const std::vector<int32_t>& ids) {
  bool wide = false;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) fail_input("token {} is id {}: token ids are not negative", i, ids[i]);
    wide = wide || ids[i] > 0xffff;
  }
  return wide;
}

void write_llmc_tokens(StagedOutput& output, const std::vector<int32_t>& tokens, bool wide) {
  if (tokens.size() > size_t(INT32_MAX))
    fail_input("{} tokens do not fit one llm.c token file (at most {})", tokens.size(), INT32_MAX);
  std::vector<int32_t> header(size_t(kLlmcHeaderInts), 0);
  header[0] = wide ? kLlmcMagicU32 : kLlmcMagic;
  header[1] = wide ? kLlmcVersionU32 : kLlmcVersion;
  header[2] = int32_t(tokens.size());
  // Every id checked before anything is written.
  std::vector<uint16_t> narrow;
  if (wide) {
    llmc_needs_u32(tokens);  // no negative id
  } else {
    narrow.resize(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] < 0 || tokens[i] > 0xffff)
        fail_input("token {} is id {}, which does not fit llm.c's uint16 tokens", i, tokens[i]);
      narrow[i] = uint16_t(tokens[i]);
    }
  }
  OutputFile& out = output.file();
  out.write(header.data(), header.size() * 4);
  if (wide)
    out.write(tokens.data(), tokens.size() * 4);  // non-negative int32 = uint32, little-endian
  else
    out.write(narrow.data(), narrow.size() * 2);
  out.sync_and_close();
}

void write_llmc_tokens(const std::string& path, const std::vector<int32_t>& tokens) {
  StagedOutput output(path, "token file");
  write_llmc_tokens(output, tokens, llmc_needs_u32(tokens));
  output.commit();
}

std::vector<std::string> expand_token_paths(const std::string& pattern, const std::string& key) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
  std::vector<std::string> paths;
  for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) paths.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (paths.empty()) fail_input("{} = '{}' matches no file", key, pattern);
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace st

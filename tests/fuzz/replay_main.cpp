// Without libFuzzer (a GCC build), each fuzz target is this driver: it runs the target once
// on every file of the directories and files given, so the corpus is a regression test.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-') continue;  // libFuzzer flags, meaningless here
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      const size_t before = files.size();
      for (const auto& e : fs::directory_iterator(argv[i]))
        if (e.is_regular_file()) files.push_back(e.path());
      if (files.size() == before) {
        std::fprintf(stderr, "replay: corpus folder '%s' holds no file\n", argv[i]);
        return 1;
      }
    } else if (fs::is_regular_file(argv[i], ec)) {
      files.emplace_back(argv[i]);
    } else {  // a missing corpus must not replay as one empty input and pass
      std::fprintf(stderr, "replay: '%s' is neither a corpus folder nor a file\n", argv[i]);
      return 1;
    }
  }
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "replay: cannot read '%s'\n", f.c_str());
      return 1;
    }
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replayed %zu inputs\n", files.size());
  return 0;
}

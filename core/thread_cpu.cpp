#include "core/thread_cpu.hpp"

#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

namespace st {

void name_this_thread(const std::string& name) {
  ::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
}

namespace {

// utime + stime (fields 14 and 15 of /proc/.../stat) in seconds. The name (field 2) is in
// parentheses and may hold spaces, so the fields are counted from its closing one.
bool read_stat(const std::filesystem::path& stat, double& cpu_s) {
  std::ifstream in(stat);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::atoll(field.c_str());
    if (i == 15) stime = std::atoll(field.c_str());
  }
  const long ticks = ::sysconf(_SC_CLK_TCK);
  if (!fields || ticks <= 0) return false;
  cpu_s = double(utime + stime) / double(ticks);
  return true;
}

}  // namespace

std::vector<ThreadCpu> thread_cpu_times() {
  std::vector<ThreadCpu> out;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    ThreadCpu t;
    t.tid = std::atoi(task.path().filename().c_str());
    std::ifstream comm(task.path() / "comm");
    std::getline(comm, t.name);
    if (read_stat(task.path() / "stat", t.cpu_s)) out.push_back(std::move(t));
  }
  return out;
}

double thread_cpu_seconds(const std::vector<ThreadCpu>& threads, const std::string& name) {
  double sum = 0;
  for (const ThreadCpu& t : threads)
    if (t.name == name.substr(0, 15)) sum += t.cpu_s;
  return sum;
}

}  // namespace st

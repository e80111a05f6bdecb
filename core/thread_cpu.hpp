#pragma once
// The threads of this process by name and the CPU time each has used: what a service thread
// (heartbeat, communication thread, watchdog, checkpoint writer) costs the cores training runs
// on. Service threads name themselves with name_this_thread so they can be found here.
#include <string>
#include <vector>

namespace st {

// Names the calling thread (at most 15 characters are kept: Linux's limit).
void name_this_thread(const std::string& name);

struct ThreadCpu {
  int tid = 0;
  std::string name;
  double cpu_s = 0;  // user + system time since the thread began
};

// Every thread of this process now (from /proc/self/task); empty where /proc is unreadable.
std::vector<ThreadCpu> thread_cpu_times();

// The CPU seconds of the threads called `name`, summed (threads that ended are not counted).
double thread_cpu_seconds(const std::vector<ThreadCpu>& threads, const std::string& name);

}  // namespace st

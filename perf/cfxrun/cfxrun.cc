// SPDX-License-Identifier: Apache-2.0
// cfxrun: a local launcher for any program that bootstraps from torchrun-style variables (cfxCommInitFromEnv,
// torch.distributed's env://, the perf suite). It forks N copies of a program with MASTER_ADDR, MASTER_PORT, RANK,
// WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE set, shows rank 0's stdout (all ranks' with --all-output) and every
// rank's stderr, and treats the job as one unit: when a rank fails, is killed, or --timeout expires, the others
// get SIGTERM and, after a grace period, SIGKILL, and cfxrun exits non-zero with a line naming the rank. With
// NCCL_DEBUG set (or --tag-output), every rank's stdout and stderr pass through, each line prefixed "[rank R] "
// (rank_output.h), so a WARN from any rank is seen and attributed.
//
//   cfxrun -n N [--host-port ADDR:PORT] [--bind auto|core|none] [--all-output] [--tag-output]
//          [--timeout SECONDS] [--grace SECONDS] prog [args...]
//
// Binding: like mpirun (which binds to cores by default), rank r is pinned to the r-th CPU of cfxrun's own
// affinity set when there are at least as many CPUs as ranks. Unpinned, the scheduler often puts two ranks on
// one CPU, and every handoff between them then costs a context switch instead of a cache-line transfer (measured
// 0.47 us vs 8 us per 1 KiB all-reduce, docs/notes/small_message_latency.md). With more ranks than CPUs `auto`
// leaves ranks unbound (as mpirun --oversubscribe does), so the scheduler can balance them; `core` pins them
// round-robin anyway, `none` never pins.
//
// Secret: every job gets a fresh random CFX_SECRET (32 bytes from getrandom, in hex) in its ranks' environment, so
// its bootstrap and data connections are authenticated: without one, anyone who can reach MASTER_PORT could join
// the job or feed it data. A CFX_SECRET or CFX_SECRET_FILE that cfxrun inherits wins (several cfxrun, one per host,
// can so share one job's secret).
//
// Exit status: 0 when every rank exited 0; else the first failing rank's exit status (128+signal when it was
// killed); 124 on --timeout; 128+signal when cfxrun itself was interrupted; 2 on usage errors.
#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rank_output.h"

namespace {

constexpr int kUsageError = 2;
constexpr int kTimeoutExit = 124;

volatile sig_atomic_t gInterrupt = 0;  // the signal that asked cfxrun to stop, 0 if none

void onSignal(int sig) { gInterrupt = sig; }

enum class Bind { Auto, Core, None };

struct Args {
  int nRanks = 0;
  std::string hostPort;
  Bind bind = Bind::Auto;
  bool allOutput = false;
  bool tagOutput = false;  // --tag-output, or NCCL_DEBUG set
  double timeoutSec = 0;
  double graceSec = 5;
  std::vector<char*> command;
};

void usage(FILE* out) {
  fprintf(out,
          "usage: cfxrun -n N [--host-port ADDR:PORT] [--bind auto|core|none] [--all-output] [--tag-output]\n"
          "              [--timeout SECONDS] [--grace SECONDS] prog [args...]\n"
          "Starts N copies of prog, rank r with MASTER_ADDR, MASTER_PORT, RANK=r, WORLD_SIZE=N, LOCAL_RANK=r and\n"
          "LOCAL_WORLD_SIZE=N set (what torchrun sets; cfxCommInitFromEnv and torch's env:// read them).\n"
          "  -n, --nranks N       number of processes (ranks) to start\n"
          "  --host-port A:P      rendezvous address given as MASTER_ADDR/MASTER_PORT (default 127.0.0.1 and a\n"
          "                       free port)\n"
          "  --bind MODE          auto (default): pin rank r to the r-th allowed CPU when there are at least as\n"
          "                       many CPUs as ranks, else leave ranks unbound; core: pin round-robin always;\n"
          "                       none: never pin\n"
          "  --all-output         show every rank's stdout (default: rank 0 only; stderr is always shown)\n"
          "  --tag-output         pass every rank's stdout and stderr through, each line prefixed '[rank R] '\n"
          "                       (the default when NCCL_DEBUG is set, so every rank's WARN lines are seen)\n"
          "  --timeout SECONDS    kill the whole job after SECONDS and exit 124\n"
          "  --grace SECONDS      time between SIGTERM and SIGKILL when stopping ranks (default 5)\n"
          "Each job gets a random CFX_SECRET unless CFX_SECRET or CFX_SECRET_FILE is already set.\n");
}

// Sets a fresh random CFX_SECRET for the ranks unless the caller gave one (file comment). False, with a message,
// when no randomness can be had.
bool ensureSecret() {
  for (const char* name : {"CFX_SECRET", "CFX_SECRET_FILE"}) {
    const char* v = getenv(name);
    if (v != nullptr && *v != '\0') return true;
  }
  unsigned char raw[32];
  size_t got = 0;
  while (got < sizeof(raw)) {
    const ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fprintf(stderr, "cfxrun: cannot draw the job's secret: getrandom: %s\n", strerror(errno));
      return false;
    }
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string text;
  for (unsigned char b : raw) {
    text += kHex[b >> 4];
    text += kHex[b & 15];
  }
  setenv("CFX_SECRET", text.c_str(), 1);
  return true;
}

bool parseDouble(const char* text, double* out) {
  char* end = nullptr;
  errno = 0;
  double v = strtod(text, &end);
  if (errno || end == text || *end || v < 0) return false;
  *out = v;
  return true;
}

bool parseArgs(int argc, char** argv, Args* a) {
  enum { kHostPort = 1000, kBind, kAllOutput, kTagOutput, kTimeout, kGrace };
  const struct option longOptions[] = {
      {"nranks", required_argument, nullptr, 'n'},
      {"host-port", required_argument, nullptr, kHostPort},
      {"bind", required_argument, nullptr, kBind},
      {"all-output", no_argument, nullptr, kAllOutput},
      {"tag-output", no_argument, nullptr, kTagOutput},
      {"timeout", required_argument, nullptr, kTimeout},
      {"grace", required_argument, nullptr, kGrace},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0},
  };
  for (;;) {
    // '+': stop at the first non-option so that the program's own flags are left alone.
    int c = getopt_long(argc, argv, "+n:h", longOptions, nullptr);
    if (c == -1) break;
    double v = 0;
    switch (c) {
      case 'n':
        if (!parseDouble(optarg, &v) || v < 1 || v > 4096 || v != static_cast<int>(v)) {
          fprintf(stderr, "cfxrun: -n needs a whole number of ranks between 1 and 4096, got '%s'\n", optarg);
          return false;
        }
        a->nRanks = static_cast<int>(v);
        break;
      case kHostPort:
        a->hostPort = optarg;
        break;
      case kBind:
        if (strcmp(optarg, "auto") == 0) {
          a->bind = Bind::Auto;
        } else if (strcmp(optarg, "core") == 0) {
          a->bind = Bind::Core;
        } else if (strcmp(optarg, "none") == 0) {
          a->bind = Bind::None;
        } else {
          fprintf(stderr, "cfxrun: --bind takes auto, core or none, got '%s'\n", optarg);
          return false;
        }
        break;
      case kAllOutput:
        a->allOutput = true;
        break;
      case kTagOutput:
        a->tagOutput = true;
        break;
      case kTimeout:
        if (!parseDouble(optarg, &a->timeoutSec)) {
          fprintf(stderr, "cfxrun: --timeout needs a number of seconds, got '%s'\n", optarg);
          return false;
        }
        break;
      case kGrace:
        if (!parseDouble(optarg, &a->graceSec)) {
          fprintf(stderr, "cfxrun: --grace needs a number of seconds, got '%s'\n", optarg);
          return false;
        }
        break;
      case 'h':
        usage(stdout);
        exit(0);
      default:
        usage(stderr);
        return false;
    }
  }
  if (a->nRanks < 1) {
    fprintf(stderr, "cfxrun: -n N is required\n");
    usage(stderr);
    return false;
  }
  if (optind >= argc) {
    fprintf(stderr, "cfxrun: no program to run\n");
    usage(stderr);
    return false;
  }
  if (const char* debug = getenv("NCCL_DEBUG"); debug != nullptr && debug[0] != '\0') a->tagOutput = true;
  for (int i = optind; i < argc; ++i) a->command.push_back(argv[i]);
  a->command.push_back(nullptr);
  return true;
}

// Binds ai's address at port (0: any) and reads back the port bound; -1 if it cannot. No SO_REUSEADDR, so a port
// with a listener, a connection or a TIME_WAIT on it is refused.
int bindPort(const struct addrinfo* ai, int port) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) return -1;
  struct sockaddr_storage ss {};
  memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
  uint16_t* where = ss.ss_family == AF_INET6 ? &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                             : &reinterpret_cast<sockaddr_in*>(&ss)->sin_port;
  *where = htons(static_cast<uint16_t>(port));
  socklen_t len = ai->ai_addrlen;
  int bound = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    bound = ntohs(*where);
  }
  close(fd);
  return bound;
}

// A port nobody listens on right now; rank 0 binds it moments later. It is drawn at random below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range), where only an explicit bind takes a port: one that bind(0) handed
// out and this closed again goes to the next bind(0) or connect() on the machine, and a run now and then failed
// with "Address already in use". Where the range leaves no room below it, whatever bind(0) gives.
bool pickFreePort(const std::string& host, std::string* port) {
  struct addrinfo hints {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  struct addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), "0", &hints, &res);
  if (rc != 0) {
    fprintf(stderr, "cfxrun: cannot resolve '%s': %s\n", host.c_str(), gai_strerror(rc));
    return false;
  }
  int low = 32768;
  int high = 60999;
  if (FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re")) {
    if (fscanf(f, "%d %d", &low, &high) != 2) low = 32768;
    fclose(f);
  }
  const int first = low - 1 >= 11000 ? std::max(10000, low - 20000) : 0;
  int bound = -1;
  if (first > 0) {
    std::mt19937 draw(std::random_device{}());
    std::uniform_int_distribution<int> pick(first, low - 1);
    for (int attempt = 0; attempt < 200 && bound < 0; ++attempt) bound = bindPort(res, pick(draw));
  }
  for (struct addrinfo* ai = res; ai && bound < 0; ai = ai->ai_next) bound = bindPort(ai, 0);
  freeaddrinfo(res);
  if (bound < 0) {
    fprintf(stderr, "cfxrun: cannot bind a free port on '%s': %s\n", host.c_str(), strerror(errno));
    return false;
  }
  *port = std::to_string(bound);
  return true;
}

bool isExecutable(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// prog as given when it has a '/', else the first match on PATH, else the file next to cfxrun (so that
// "cfxrun -n 4 all_reduce_perf" works from the build directory without PATH changes).
std::string resolveProgram(const char* prog) {
  if (strchr(prog, '/')) return prog;
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + prog;
    if (isExecutable(candidate)) return candidate;
    start = end + 1;
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = '\0';
    std::string dir(self);
    dir = dir.substr(0, dir.rfind('/'));
    if (isExecutable(dir + "/" + prog)) return dir + "/" + prog;
  }
  return prog;  // execvp reports the failure
}

// The CPU each rank is pinned to, or an empty list when ranks stay unbound. CPUs come from cfxrun's own affinity
// mask, so a job started under taskset or in a cpuset stays inside it.
std::vector<int> planBinding(Bind mode, int nRanks) {
  if (mode == Bind::None) return {};
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    fprintf(stderr, "cfxrun: cannot read the CPU affinity mask (%s); ranks stay unbound\n", strerror(errno));
    return {};
  }
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (cpus.empty() || (mode == Bind::Auto && static_cast<int>(cpus.size()) < nRanks)) return {};
  std::vector<int> plan(static_cast<size_t>(nRanks));
  for (int r = 0; r < nRanks; ++r) plan[static_cast<size_t>(r)] = cpus[static_cast<size_t>(r) % cpus.size()];
  return plan;
}

struct Child {
  pid_t pid = -1;
  bool running = false;
  int status = 0;
};

std::string describe(int status) {
  char buf[128];
  if (WIFEXITED(status)) {
    snprintf(buf, sizeof(buf), "exited with status %d", WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    snprintf(buf, sizeof(buf), "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  } else {
    snprintf(buf, sizeof(buf), "ended with wait status 0x%x", status);
  }
  return buf;
}

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Each child leads its own process group, so signals reach whatever it starts too.
void signalAll(std::vector<Child>& children, int sig) {
  for (Child& c : children) {
    if (c.running) kill(-c.pid, sig);
  }
}

// Reaps every child that has ended; returns the index of the first that failed in this pass, -1 if none.
int reap(std::vector<Child>& children, int* running) {
  int failed = -1;
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    for (size_t r = 0; r < children.size(); ++r) {
      if (children[r].pid != pid || !children[r].running) continue;
      children[r].running = false;
      children[r].status = status;
      --*running;
      bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && failed < 0) failed = static_cast<int>(r);
    }
  }
  return failed;
}

void stopAll(std::vector<Child>& children, int* running, double graceSec) {
  signalAll(children, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(graceSec);
  while (*running > 0 && std::chrono::steady_clock::now() < deadline) {
    reap(children, running);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (*running > 0) {
    signalAll(children, SIGKILL);
    while (*running > 0) {
      int status = 0;
      pid_t pid = waitpid(-1, &status, 0);
      if (pid < 0 && errno != EINTR) break;
      for (Child& c : children) {
        if (c.pid == pid && c.running) c.running = false, c.status = status, --*running;
      }
    }
  }
}

[[noreturn]] void execChild(const Args& a, const std::string& program, int rank, int cpu, const std::string& addr,
                            const std::string& port, cfxrun::RankOutput* tagged) {
  setpgid(0, 0);
  if (cpu >= 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) {
      fprintf(stderr, "cfxrun: rank %d: cannot bind to CPU %d (%s); it runs unbound\n", rank, cpu, strerror(errno));
    }
  }
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  setenv("MASTER_ADDR", addr.c_str(), 1);
  setenv("MASTER_PORT", port.c_str(), 1);
  setenv("RANK", std::to_string(rank).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(a.nRanks).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(a.nRanks).c_str(), 1);
  if (tagged != nullptr) {
    tagged->attachChild(rank);
  } else if (rank != 0 && !a.allOutput) {
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      dup2(devnull, STDOUT_FILENO);
      close(devnull);
    }
  }
  execv(program.c_str(), a.command.data());
  if (errno == ENOENT && !strchr(a.command[0], '/')) execvp(a.command[0], a.command.data());
  fprintf(stderr, "cfxrun: rank %d: cannot execute '%s': %s\n", rank, a.command[0], strerror(errno));
  _exit(127);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parseArgs(argc, argv, &a)) return kUsageError;

  std::string addr = "127.0.0.1";
  std::string port;
  if (!a.hostPort.empty()) {
    size_t colon = a.hostPort.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == a.hostPort.size()) {
      fprintf(stderr, "cfxrun: --host-port needs ADDR:PORT, got '%s'\n", a.hostPort.c_str());
      return kUsageError;
    }
    addr = a.hostPort.substr(0, colon);
    port = a.hostPort.substr(colon + 1);
    if (addr.size() > 2 && addr.front() == '[' && addr.back() == ']') addr = addr.substr(1, addr.size() - 2);
  } else if (!pickFreePort(addr, &port)) {
    return 1;
  }
  std::string program = resolveProgram(a.command[0]);
  const std::vector<int> binding = planBinding(a.bind, a.nRanks);
  if (!ensureSecret()) return 1;

  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);

  cfxrun::RankOutput output;
  if (a.tagOutput && !output.open(a.nRanks)) return 1;
  cfxrun::RankOutput* tagged = a.tagOutput ? &output : nullptr;
  fflush(stdout);
  fflush(stderr);
  std::vector<Child> children(a.nRanks);
  int running = 0;
  for (int r = 0; r < a.nRanks; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      fprintf(stderr, "cfxrun: fork for rank %d failed: %s\n", r, strerror(errno));
      stopAll(children, &running, a.graceSec);
      return 1;
    }
    if (pid == 0) execChild(a, program, r, binding.empty() ? -1 : binding[static_cast<size_t>(r)], addr, port, tagged);
    setpgid(pid, pid);  // also in the parent, so kill(-pid) works even before the child runs
    children[r].pid = pid;
    children[r].running = true;
    ++running;
  }

  if (tagged) tagged->closeChildEnds();
  // Relays what is left of the ranks' output (tagged mode) before cfxrun's own last line and exit.
  auto finish = [&](int code) {
    if (tagged) tagged->drain(1000);
    return code;
  };
  const auto start = std::chrono::steady_clock::now();
  while (running > 0) {
    int failed = reap(children, &running);
    if (failed >= 0) {
      fprintf(stderr, "cfxrun: rank %d (pid %d) %s; stopping the other ranks\n", failed, children[failed].pid,
              describe(children[failed].status).c_str());
      stopAll(children, &running, a.graceSec);
      return finish(exitCodeOf(children[failed].status));
    }
    if (gInterrupt) {
      int sig = gInterrupt;
      fprintf(stderr, "cfxrun: received signal %d (%s); stopping all ranks\n", sig, strsignal(sig));
      stopAll(children, &running, a.graceSec);
      return finish(128 + sig);
    }
    if (a.timeoutSec > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > a.timeoutSec) {
      fprintf(stderr, "cfxrun: timeout after %g s; ranks still running:", a.timeoutSec);
      for (int r = 0; r < a.nRanks; ++r) {
        if (children[r].running) fprintf(stderr, " %d", r);
      }
      fprintf(stderr, "; stopping them\n");
      stopAll(children, &running, a.graceSec);
      return finish(kTimeoutExit);
    }
    if (tagged) {
      tagged->pump(20);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return finish(0);
}

#pragma once
/// Test support: run the `attest` CLI as a user would and keep what it printed. ATTEST_CLI (the
/// binary's path) is a compile definition of the test targets that use it.
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace attest::testing {

struct CliRun {
  int code = -1;    ///< exit status; -1 when the command could not run or was killed
  std::string out;  ///< stdout, and stderr too unless run with Stderr::apart
  std::string err;  ///< stderr when run with Stderr::apart, else empty
};

/// Where a command's stderr goes: into CliRun::out with stdout (folded, as `2>&1` does) or
/// into CliRun::err on its own (apart).
enum class Stderr { folded, apart };

/// Runs a shell command (`/bin/sh -c`) and waits for it; both streams are read as they come, so
/// neither can fill its pipe and stall the command. POSIX pipe/fork/poll by hand: Boost.Process
/// would do it, but it is a compiled-in dependency of every test target for ~60 lines.
inline CliRun run_command(const std::string& command, Stderr stderr_to = Stderr::folded) {
  CliRun r;
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  const bool apart = stderr_to == Stderr::apart;
  if (::pipe(out) != 0) return r;
  if (apart && ::pipe(err) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return r;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1]})
      if (fd >= 0) ::close(fd);
    return r;
  }
  if (pid == 0) {  // the child: only async-signal-safe calls until exec
    ::dup2(out[1], 1);
    ::dup2(apart ? err[1] : out[1], 2);
    for (int fd : {out[0], out[1], err[0], err[1]})
      if (fd > 2) ::close(fd);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  if (apart) ::close(err[1]);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {apart ? err[0] : -1, POLLIN, 0}};  // poll skips fd -1
  std::string* sink[2] = {&r.out, &r.err};
  for (int open = apart ? 2 : 1; open > 0;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sink[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {  // end of stream, or a read error
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (const pollfd& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0) {
    if (errno != EINTR) return r;
  }
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

#ifdef ATTEST_CLI
/// `attest ARGS` (ARGS as a shell would split them).
inline CliRun run_cli(const std::string& args, Stderr stderr_to = Stderr::folded) {
  return run_command(std::string(ATTEST_CLI) + " " + args, stderr_to);
}
#endif

}  // namespace attest::testing

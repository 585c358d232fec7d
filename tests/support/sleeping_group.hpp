// test::SleepingGroup — a real process group for tests of what reads /proc: a leader in a group of its own
// (like an engine and its workers), `children` sleeping children, and `orphans` grandchildren whose parent
// exited (adopted elsewhere, still in the group). Ready when constructed (the leader says so on a pipe once
// every member exists); the whole group is SIGKILLed and the leader reaped on destruction.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

namespace loch::test {

class SleepingGroup {
  public:
    explicit SleepingGroup(int children, int orphans = 0) {
        int ready[2];
        if (::pipe(ready) != 0) return;
        leader_ = ::fork();
        if (leader_ == 0) {
            ::setpgid(0, 0);
            ::close(ready[0]);
            for (int i = 0; i < children; ++i)
                if (::fork() == 0) sleep_forever();
            for (int i = 0; i < orphans; ++i)
                if (const pid_t middle = ::fork(); middle == 0) {
                    if (::fork() == 0) sleep_forever();
                    ::_exit(0);  // leaves its child to be adopted
                } else {
                    int st = 0;
                    ::waitpid(middle, &st, 0);
                }
            const char done = 1;
            if (::write(ready[1], &done, 1) != 1) ::_exit(126);
            ::close(ready[1]);
            sleep_forever();
        }
        if (leader_ > 0) ::setpgid(leader_, leader_);
        ::close(ready[1]);
        char done = 0;
        if (leader_ < 0 || ::read(ready[0], &done, 1) != 1) leader_ = -1;
        ::close(ready[0]);
    }
    ~SleepingGroup() {
        if (leader_ <= 0) return;
        ::kill(-leader_, SIGKILL);
        int st = 0;
        ::waitpid(leader_, &st, 0);
    }
    SleepingGroup(const SleepingGroup&) = delete;
    SleepingGroup& operator=(const SleepingGroup&) = delete;

    // The leader's pid (= the group's id); -1 when the group could not be made.
    pid_t leader() const { return leader_; }

  private:
    [[noreturn]] static void sleep_forever() {
        ::execl("/bin/sleep", "sleep", "60", nullptr);
        ::_exit(127);
    }
    pid_t leader_ = -1;
};

}  // namespace loch::test

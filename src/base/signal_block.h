// SignalBlock: blocks some signals in the calling thread from construction
// until Release() or destruction (threads started meanwhile inherit the
// mask and keep it). Servers use it to close the window between opening
// their port and installing their SIGTERM handler: a signal sent in that
// window stays pending and is handled once the handler is in and the block
// released, instead of killing the process by its default action.
// Thread-safety: affects only the calling thread's mask; use from one thread.
#pragma once

#include <csignal>
#include <initializer_list>

namespace kvs {

class SignalBlock {
 public:
  explicit SignalBlock(std::initializer_list<int> signals) {
    sigemptyset(&set_);
    for (int s : signals) sigaddset(&set_, s);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  }
  ~SignalBlock() { Release(); }
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;

  // Leaves the signals blocked in the calling thread for good: neither
  // Release() nor the destructor unblocks them. For a process that ignores
  // them until it exits: a signal still pending when it unblocked them would
  // end it by the signal's default action instead of its own exit status.
  void KeepBlocked() { held_ = false; }

  // Unblocks the signals in the calling thread (once); pending ones are
  // delivered now.
  void Release() {
    if (!held_) return;
    held_ = false;
    pthread_sigmask(SIG_UNBLOCK, &set_, nullptr);
  }

 private:
  sigset_t set_;
  bool held_ = true;
};

}  // namespace kvs

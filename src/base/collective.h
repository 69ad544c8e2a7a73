// Collective: the communication a tensor-parallel group of ranks needs, as
// an interface so that the model (which sums partial results) and the
// runner (which hands every rank the step's batch) do not know how the
// ranks talk. backend/mpi_collective.h is the implementation the server
// runs under `mpirun` (Open MPI: shared memory within a host, TCP across
// hosts); tests also use an in-process one over threads.
//
// Every call is collective: all ranks of the group make the same calls in
// the same order with the same sizes (root's size for Broadcast), or the
// group hangs. A failed transport is not recoverable: implementations end
// the group (MPI's default handler aborts every rank), so the calls return
// nothing to check.
// Thread-safety: one thread per rank makes the calls (the engine thread on
// rank 0, the worker loop on the others).
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

namespace kvs {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // data[i] = the sum of data[i] over the ranks, on every rank. Timed and
  // counted (the time includes waiting for the slowest rank).
  void AllReduceSum(std::span<float> data) {
    const auto t0 = std::chrono::steady_clock::now();
    DoAllReduceSum(data);
    allreduce_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    allreduce_bytes_ += static_cast<int64_t>(data.size_bytes());
    ++allreduce_calls_;
  }
  // Root's bytes to every rank: on the others `bytes` is resized to root's
  // length and overwritten.
  virtual void Broadcast(std::vector<uint8_t>& bytes, int root) = 0;
  // Point to point (pipeline parallel: activations stage to stage, logits
  // back to rank 0), between ranks of this group; `tag` keeps the kinds of
  // message apart (each kind arrives in the order it was sent). Send may
  // return before the peer receives.
  virtual void Send(std::span<const float> data, int peer, int tag) = 0;
  void Recv(std::span<float> data, int peer, int tag) {
    const auto t0 = std::chrono::steady_clock::now();
    DoRecv(data, peer, tag);
    wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // A receive posted now and completed by WaitPosted: a peer's Send of it
  // then never waits for this rank to be ready (what keeps a pipeline from
  // deadlocking when the last stage returns logits while rank 0 still sends).
  virtual void PostRecv(std::span<float> data, int peer, int tag) = 0;
  void WaitPosted() {
    const auto t0 = std::chrono::steady_clock::now();
    DoWaitPosted();
    wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // Collective: the ranks of this group that pass the same color, ordered
  // by key, as a group of their own (a pipeline stage's tensor-parallel
  // ranks). Owned by this group.
  virtual Collective* Split(int color, int key) = 0;
  // AllReduceSum so far on this rank: its payload bytes, calls and seconds
  // (for metrics).
  int64_t allreduce_bytes() const { return allreduce_bytes_; }
  int64_t allreduce_calls() const { return allreduce_calls_; }
  double allreduce_seconds() const { return allreduce_seconds_; }
  // Seconds in Recv and WaitPosted so far: a pipeline stage waiting for its
  // input (or rank 0 for the logits), the pipeline's bubbles.
  double wait_seconds() const { return wait_seconds_; }

 protected:
  virtual void DoAllReduceSum(std::span<float> data) = 0;
  virtual void DoRecv(std::span<float> data, int peer, int tag) = 0;
  virtual void DoWaitPosted() = 0;

 private:
  int64_t allreduce_bytes_ = 0;
  int64_t allreduce_calls_ = 0;
  double allreduce_seconds_ = 0;
  double wait_seconds_ = 0;
};

}  // namespace kvs

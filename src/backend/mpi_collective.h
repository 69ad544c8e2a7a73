// MPI: the process group of `mpirun -np N kvserve serve --tensor-parallel T
// --pipeline-parallel P` (N = T x P; Open MPI: shared memory within a host,
// TCP across hosts). One per process: Open initializes MPI, the destructor
// finalizes it once every rank has left its work loop, or aborts the whole
// job when this process ends early (a failed start-up, an error exit), so
// that no rank is left waiting in a collective for a peer that is gone.
// Split makes the sub-groups (a pipeline stage's tensor-parallel ranks),
// owned by the group.
// Thread-safety: MPI is initialized for one calling thread at a time
// (MPI_THREAD_SERIALIZED): the main thread starts it, the engine thread (or
// the worker loop) makes the calls.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/collective.h"
#include "base/status.h"

namespace kvs::backend {

class MpiGroup : public Collective {
 public:
  // Initializes MPI (the world group). Unimplemented when this build has no MPI.
  static StatusOr<std::unique_ptr<MpiGroup>> Open();
  ~MpiGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void Broadcast(std::vector<uint8_t>& bytes, int root) override;
  void Send(std::span<const float> data, int peer, int tag) override;
  void PostRecv(std::span<float> data, int peer, int tag) override;
  Collective* Split(int color, int key) override;
  // Every rank has finished its part (the leader sent the stop, or a worker
  // received it): the destructor may finalize instead of aborting.
  void MarkDone() { done_ = true; }
  // The host this rank runs on (MPI_Get_processor_name).
  const std::string& host() const { return host_; }

 protected:
  void DoAllReduceSum(std::span<float> data) override;
  void DoRecv(std::span<float> data, int peer, int tag) override;
  void DoWaitPosted() override;

 private:
  struct Comm;  // the communicator and pending requests (mpi.h stays in the .cc)
  explicit MpiGroup(std::unique_ptr<Comm> comm, bool world);
  std::unique_ptr<Comm> comm_;
  bool world_ = true;  // finalizes MPI when destroyed
  int rank_ = 0;
  int size_ = 1;
  bool done_ = false;
  std::string host_;
  std::vector<std::unique_ptr<MpiGroup>> children_;  // Split's groups
};

}  // namespace kvs::backend

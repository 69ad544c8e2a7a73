// MPI: the process group of `mpirun -np N kvserve serve --tensor-parallel N`
// (Open MPI: shared memory within a host, TCP across hosts). One per
// process: Open initializes MPI, the destructor finalizes it once every rank
// has left its work loop, or aborts the whole job when this process ends
// early (a failed start-up, an error exit), so that no rank is left waiting
// in a collective for a peer that is gone.
// Thread-safety: MPI is initialized for one calling thread at a time
// (MPI_THREAD_SERIALIZED): the main thread starts it, the engine thread (or
// the worker loop) makes the calls.
#pragma once

#include <memory>

#include "base/collective.h"
#include "base/status.h"

namespace kvs::backend {

class MpiGroup : public Collective {
 public:
  // Initializes MPI. Unimplemented when this build has no MPI.
  static StatusOr<std::unique_ptr<MpiGroup>> Open();
  ~MpiGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void Broadcast(std::vector<uint8_t>& bytes, int root) override;
  // Every rank has finished its part (the leader sent the stop, or a worker
  // received it): the destructor may finalize instead of aborting.
  void MarkDone() { done_ = true; }
  // The host this rank runs on (MPI_Get_processor_name).
  const std::string& host() const { return host_; }

 protected:
  void DoAllReduceSum(std::span<float> data) override;

 private:
  MpiGroup() = default;
  int rank_ = 0;
  int size_ = 1;
  bool done_ = false;
  std::string host_;
};

// Whether this process was started by mpirun (Open MPI's or MPICH's
// environment), without initializing MPI.
bool LaunchedByMpirun();

}  // namespace kvs::backend

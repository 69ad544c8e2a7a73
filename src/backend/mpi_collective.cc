#include "backend/mpi_collective.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <thread>

#ifdef KVS_HAVE_MPI
#include <mpi.h>
#endif

namespace kvs::backend {

#ifdef KVS_HAVE_MPI

struct MpiGroup::Comm {
  MPI_Comm comm = MPI_COMM_WORLD;
  std::vector<MPI_Request> posted;
};

MpiGroup::MpiGroup(std::unique_ptr<Comm> comm, bool world) : comm_(std::move(comm)), world_(world) {
  MPI_Comm_rank(comm_->comm, &rank_);
  MPI_Comm_size(comm_->comm, &size_);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  host_.assign(name, static_cast<size_t>(len));
}

StatusOr<std::unique_ptr<MpiGroup>> MpiGroup::Open() {
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    return Internal("MPI_Init_thread failed");
  }
  std::unique_ptr<MpiGroup> g(new MpiGroup(std::make_unique<Comm>(), true));
  if (provided < MPI_THREAD_SERIALIZED) {
    return Internal("this MPI library gives thread level {}, kvserve needs MPI_THREAD_SERIALIZED", provided);
  }
  return g;
}

MpiGroup::~MpiGroup() {
  children_.clear();
  if (!world_) {
    MPI_Comm_free(&comm_->comm);
    return;
  }
  if (done_ || size_ == 1) {
    MPI_Finalize();
  } else {
    // A peer may be waiting in a collective this rank will never join:
    // end every rank of the job (mpirun reports which one aborted).
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

void MpiGroup::DoAllReduceSum(std::span<float> data) {
  // Counts are ints: a [tokens, hidden] activation stays far below 2^31 floats.
  MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM, comm_->comm);
}

void MpiGroup::Broadcast(std::vector<uint8_t>& bytes, int root) {
  uint64_t n = bytes.size();
  // Non-blocking on every rank: MPI matches a nonblocking collective only
  // with nonblocking ones.
  MPI_Request req;
  MPI_Ibcast(&n, 1, MPI_UINT64_T, root, comm_->comm, &req);
  if (rank_ == root) {
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  } else {
    // A worker waits here between steps, for as long as the replica is
    // idle: MPI's blocking wait spins a core, so poll with a growing sleep
    // (at most 1 ms late after a pause; steps that follow each other find
    // the next message at once).
    int done = 0;
    for (int spins = 0;; ++spins) {
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (done) break;
      if (spins > 200) std::this_thread::sleep_for(std::chrono::microseconds(spins > 2000 ? 1000 : 50));
    }
  }
  bytes.resize(n);
  constexpr uint64_t kChunk = std::numeric_limits<int>::max();
  for (uint64_t off = 0; off < n; off += kChunk) {
    MPI_Bcast(bytes.data() + off, static_cast<int>(std::min(kChunk, n - off)), MPI_BYTE, root, comm_->comm);
  }
}

void MpiGroup::Send(std::span<const float> data, int peer, int tag) {
  MPI_Send(data.data(), static_cast<int>(data.size()), MPI_FLOAT, peer, tag, comm_->comm);
}

void MpiGroup::DoRecv(std::span<float> data, int peer, int tag) {
  MPI_Recv(data.data(), static_cast<int>(data.size()), MPI_FLOAT, peer, tag, comm_->comm, MPI_STATUS_IGNORE);
}

void MpiGroup::PostRecv(std::span<float> data, int peer, int tag) {
  MPI_Request& req = comm_->posted.emplace_back();
  MPI_Irecv(data.data(), static_cast<int>(data.size()), MPI_FLOAT, peer, tag, comm_->comm, &req);
}

void MpiGroup::DoWaitPosted() {
  MPI_Waitall(static_cast<int>(comm_->posted.size()), comm_->posted.data(), MPI_STATUSES_IGNORE);
  comm_->posted.clear();
}

Collective* MpiGroup::Split(int color, int key) {
  auto c = std::make_unique<Comm>();
  MPI_Comm_split(comm_->comm, color, key, &c->comm);
  children_.push_back(std::unique_ptr<MpiGroup>(new MpiGroup(std::move(c), false)));
  return children_.back().get();
}

#else  // !KVS_HAVE_MPI

struct MpiGroup::Comm {};
MpiGroup::MpiGroup(std::unique_ptr<Comm> comm, bool world) : comm_(std::move(comm)), world_(world) {}
StatusOr<std::unique_ptr<MpiGroup>> MpiGroup::Open() {
  return Unimplemented("this kvserve was built without MPI (install libopenmpi-dev and openmpi-bin, then rebuild)");
}
MpiGroup::~MpiGroup() = default;
void MpiGroup::DoAllReduceSum(std::span<float>) {}
void MpiGroup::Broadcast(std::vector<uint8_t>&, int) {}
void MpiGroup::Send(std::span<const float>, int, int) {}
void MpiGroup::DoRecv(std::span<float>, int, int) {}
void MpiGroup::PostRecv(std::span<float>, int, int) {}
void MpiGroup::DoWaitPosted() {}
Collective* MpiGroup::Split(int, int) { return this; }

#endif

}  // namespace kvs::backend

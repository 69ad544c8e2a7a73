#include "backend/mpi_collective.h"

#include <chrono>
#include <cstdlib>
#include <limits>
#include <thread>

#ifdef KVS_HAVE_MPI
#include <mpi.h>
#endif

namespace kvs::backend {

bool LaunchedByMpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr;
}

#ifdef KVS_HAVE_MPI

StatusOr<std::unique_ptr<MpiGroup>> MpiGroup::Open() {
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    return Internal("MPI_Init_thread failed");
  }
  std::unique_ptr<MpiGroup> g(new MpiGroup());
  if (provided < MPI_THREAD_SERIALIZED) {
    return Internal("this MPI library gives thread level {}, kvserve needs MPI_THREAD_SERIALIZED", provided);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &g->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &g->size_);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  g->host_.assign(name, static_cast<size_t>(len));
  return g;
}

MpiGroup::~MpiGroup() {
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
  MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

void MpiGroup::Broadcast(std::vector<uint8_t>& bytes, int root) {
  uint64_t n = bytes.size();
  // Non-blocking on every rank: MPI matches a nonblocking collective only
  // with nonblocking ones.
  if (rank_ == root) {
    MPI_Request req;
    MPI_Ibcast(&n, 1, MPI_UINT64_T, root, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  } else {
    // A worker waits here between steps, for as long as the replica is
    // idle: MPI's blocking wait spins a core, so poll with a growing sleep
    // (at most 1 ms late after a pause; steps that follow each other find
    // the next message at once).
    MPI_Request req;
    MPI_Ibcast(&n, 1, MPI_UINT64_T, root, MPI_COMM_WORLD, &req);
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
    MPI_Bcast(bytes.data() + off, static_cast<int>(std::min(kChunk, n - off)), MPI_BYTE, root, MPI_COMM_WORLD);
  }
}

#else  // !KVS_HAVE_MPI

StatusOr<std::unique_ptr<MpiGroup>> MpiGroup::Open() {
  return Unimplemented("this kvserve was built without MPI (install libopenmpi-dev and openmpi-bin, then rebuild)");
}
MpiGroup::~MpiGroup() = default;
void MpiGroup::DoAllReduceSum(std::span<float>) {}
void MpiGroup::Broadcast(std::vector<uint8_t>&, int) {}

#endif

}  // namespace kvs::backend

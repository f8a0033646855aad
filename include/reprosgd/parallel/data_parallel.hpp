// SPDX-License-Identifier: BSD-3-Clause
/// @file DataParallel: MPI data parallelism whose collectives are integer or gather operations only.
#pragma once

#include <reprosgd/config.hpp>

#if !REPROSGD_HAS_MPI
#error "reprosgd/parallel/data_parallel.hpp needs MPI: build with REPROSGD_ENABLE_MPI=ON and link ReproSGD::reprosgd (it defines REPROSGD_HAS_MPI=1). Serial-only programs use reprosgd/parallel/serial.hpp."
#endif

#include <reprosgd/concepts/buddy_exchange.hpp>
#include <reprosgd/concepts/exchange.hpp>
#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/detail/mpi_check.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/parallel/mpi_device_memory.hpp>
#include <reprosgd/reduction/exact.hpp>

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <climits>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

namespace detail {

/// A rank-1 Kokkos View of T that the host can read and write (what MPI is handed).
template <class V, class T>
concept HostVectorOf = Kokkos::is_view<V>::value && (V::rank == 1) &&
                       std::is_same_v<typename V::non_const_value_type, T> &&
                       static_cast<bool>(Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename V::memory_space>::accessible);

/// A rank-1 Kokkos View of T in any memory space: host memory, or device memory that
/// DataParallel hands to MPI only when the library is device-aware (reads_space_memory()).
template <class V, class T>
concept VectorOf = Kokkos::is_view<V>::value && (V::rank == 1) && std::is_same_v<typename V::non_const_value_type, T>;

/// A rank-1 host-accessible View of an arithmetic type MPI can send.
template <class V>
concept HostArithmeticVector = Kokkos::is_view<V>::value && (V::rank == 1) &&
                               std::is_arithmetic_v<typename V::non_const_value_type> &&
                               static_cast<bool>(Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename V::memory_space>::accessible);

}  // namespace detail

/**
 * Data parallelism over an MPI communicator: every rank holds the whole model and owns a
 * contiguous run of each global batch's micro-batches (micro_batch_range_of; docs/distributed.md, "The micro-batch map").
 *
 * Its collectives are integer reductions (MAX, exact SUM, logical AND) and gathers, never a float
 * MPI_SUM: their results do not depend on the order in which the MPI library combines the ranks'
 * contributions, so the rank count enters the numerics only through the micro-batch map, and the
 * Exact reduction removes even that (contract level L3).
 *
 * The constructor duplicates the communicator it is given (so the library's messages can never
 * match the user's) and sets MPI_ERRORS_RETURN on the duplicate: every MPI failure becomes a
 * reprosgd::comm_error instead of an abort.
 *
 * Move-only (it owns the duplicate, freed by the destructor, which never throws). Create it after
 * MPI is initialised (see MpiEnvironment) and destroy it before MPI_Finalize.
 *
 * @tparam ExecSpace Kokkos execution space the kernels run on.
 * @tparam Red How micro-batch gradients are summed across ranks (Exact: rank-independent bits).
 *
 * **Example**:
 * @code
 * reprosgd::MpiEnvironment mpi(argc, argv);
 * Kokkos::ScopeGuard kokkos(argc, argv);
 * {
 *   reprosgd::DataParallel<> par;                      // dup of MPI_COMM_WORLD
 *   auto mine = par.micro_batch_range(M);              // [begin, end) of the M micro-batches
 * }
 * @endcode
 */
template <class ExecSpace = Kokkos::DefaultExecutionSpace, class Red = Exact>
class DataParallel {
  static_assert(Kokkos::is_execution_space<ExecSpace>::value,
                "reprosgd::DataParallel<ExecSpace>: ExecSpace must be a Kokkos execution space");

 public:
  using execution_space = ExecSpace;
  using reduction_type = Red;

  /**
   * Duplicate `comm` (collective over it) and set MPI_ERRORS_RETURN on the duplicate.
   * @param comm  the user's communicator (default MPI_COMM_WORLD); it is not modified
   * @param space the execution-space instance kernels run on
   * @throws config_error if MPI is not initialised; comm_error if a setup call fails
   * @collective over `comm`
   */
  explicit DataParallel(MPI_Comm comm = MPI_COMM_WORLD, const ExecSpace& space = ExecSpace()) : space_(space) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized || detail::mpi_finalized())
      throw config_error("reprosgd::DataParallel: MPI is not initialised (create a reprosgd::MpiEnvironment first)");
    if (comm == MPI_COMM_NULL) throw config_error("reprosgd::DataParallel: the communicator is MPI_COMM_NULL");
    MPI_Comm dup = MPI_COMM_NULL;
    {
      const detail::ErrorsReturnScope returning(comm);  // a rank lost meanwhile: a comm_error, not an abort
      detail::mpi_check(MPI_Comm_dup(comm, &dup), "reprosgd::DataParallel: MPI_Comm_dup");
    }
    comm_ = detail::CommHandle(dup);
    detail::mpi_check(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN), "reprosgd::DataParallel: MPI_Comm_set_errhandler");
    detail::mpi_check(MPI_Comm_rank(dup, &rank_), "reprosgd::DataParallel: MPI_Comm_rank");
    detail::mpi_check(MPI_Comm_size(dup, &size_), "reprosgd::DataParallel: MPI_Comm_size");
    reads_space_memory_ = mpi_reads_memory<typename ExecSpace::memory_space>(mpi_device_support());
  }

  DataParallel(DataParallel&&) noexcept = default;
  DataParallel& operator=(DataParallel&&) noexcept = default;
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;
  ~DataParallel() = default;

  static constexpr const char* name() noexcept { return "data_parallel"; }

  /// This process's rank in the (duplicated) communicator.
  [[nodiscard]] int rank() const noexcept { return rank_; }
  /// The number of ranks P.
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] const execution_space& space() const noexcept { return space_; }
  /// The duplicated communicator (MPI_ERRORS_RETURN), for extensions such as ULFM recovery.
  [[nodiscard]] MPI_Comm comm() const noexcept { return comm_.get(); }
  /// Whether MPI may be handed Views in the execution space's memory: always for host memory; for
  /// device memory when the MPI library is CUDA- or ROCm-aware (asked once, at construction:
  /// parallel/mpi_device_memory.hpp). When it is false the Exact reduction stages its integers
  /// through host buffers; the integers, so the bits, are the same either way.
  [[nodiscard]] bool reads_space_memory() const noexcept { return reads_space_memory_; }

  /**
   * The micro-batches of a global batch of M that this rank owns: [ceil(r*M/P), ceil((r+1)*M/P)).
   * The ranges of ranks 0..P-1 tile [0, M) in order. With M >= P every rank owns at least one;
   * with M < P some own none (their range is empty), which every collective here allows.
   * @throws config_error if micro_batches < 0
   * @deterministic a pure function of (rank, P, M); not collective
   */
  [[nodiscard]] MicroBatchRange micro_batch_range(long micro_batches) const {
    if (micro_batches < 0)
      throw config_error("reprosgd::DataParallel::micro_batch_range: " + std::to_string(micro_batches) +
                         " micro-batches (must be >= 0)");
    return micro_batch_range_of(rank_, size_, micro_batches);
  }

  /// @collective Wait for every rank. @throws comm_error
  void barrier() const { check_(comm(), MPI_Barrier(comm()), "reprosgd::DataParallel::barrier", "MPI_Barrier"); }

  /**
   * Logical AND of `flag` over all ranks: every rank gets the same answer, so a check that failed
   * on one rank can be thrown on all of them together (a rank that threw alone would leave the
   * others waiting in the next collective; trainer/agreement.hpp).
   * @collective @deterministic @throws comm_error
   */
  [[nodiscard]] bool agree(bool flag) const {
    int in = flag ? 1 : 0, out = 0;
    check_(comm(), MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LAND, comm()), "reprosgd::DataParallel::agree",
           "MPI_Allreduce(MPI_LAND)");
    return out != 0;
  }

  /**
   * Elementwise MAX over ranks, in place, of a View of int32 (e.g. block exponents) in host
   * memory, or in the execution space's memory when reads_space_memory().
   * Every rank must pass the same length. @collective @deterministic
   * @throws config_error if the View is not contiguous or MPI cannot read its memory; comm_error
   */
  template <class View>
    requires detail::VectorOf<View, std::int32_t>
  void allreduce_max(const View& values) const {
    allreduce_in_place(values, MPI_MAX, "reprosgd::DataParallel::allreduce_max");
  }

  /**
   * Elementwise SUM over ranks, in place, of a View of int64 (MPI_INT64_T) in host memory, or in
   * the execution space's memory when reads_space_memory(). Integer addition is associative, so
   * the result is exact and independent of the MPI algorithm; overflow is the caller's to prevent
   * (Exact reserves headroom bits for it). @collective @deterministic
   * @throws config_error if the View is not contiguous or MPI cannot read its memory; comm_error
   */
  template <class View>
    requires detail::VectorOf<View, std::int64_t>
  void allreduce_sum(const View& values) const {
    allreduce_in_place(values, MPI_SUM, "reprosgd::DataParallel::allreduce_sum");
  }

  /**
   * For code that calls MPI on comm() itself (the Trainer's buddy exchange): hand every return
   * code to check(), which applies this policy's error semantics — comm_error here, revoke and
   * process_failure in UlfmDataParallel. Not collective.
   */
  void check(int rc, const char* who, const char* call) const { check_(comm(), rc, who, call); }

  /**
   * The Exact reduction's exchange (the Exchange concept, concepts/exchange.hpp): this rank's k
   * rows' elements [offsets[q], offsets[q+1]) to each other rank q, all at once (point-to-point,
   * non-blocking, one message per row), and every other rank's rows of this rank's run into
   * `received`, from ranks rank-1, rank-2, ... in that order, rows_of[src] rows each.
   * @collective @throws config_error if a run is longer than 2^31 - 1 floats; comm_error
   */
  void exchange_runs(const float* rows, long k, long row_stride, std::span<const long> offsets,
                     std::span<const std::int32_t> rows_of, float* received) const {
    const long p = size_, rank = rank_;
    constexpr int tag = 0x5252;  // the duplicate communicator carries no other point-to-point traffic
    const int mine = count_of(offsets, rank, "reprosgd::DataParallel::exchange_runs");
    std::vector<MPI_Request> requests;
    requests.reserve(static_cast<std::size_t>(2 * (p - 1) * (k > 2 ? k : 2)));
    long row = 0;
    for (long d = 1; d < p; ++d) {
      const long src = (rank - d + p) % p;
      for (long v = 0; v < rows_of[static_cast<std::size_t>(src)]; ++v, ++row) {
        requests.emplace_back();
        check(MPI_Irecv(received + row * mine, mine, MPI_FLOAT, static_cast<int>(src), tag, comm(), &requests.back()),
              "reprosgd::DataParallel::exchange_runs", "MPI_Irecv(MPI_FLOAT)");
      }
    }
    for (long d = 1; d < p; ++d) {
      const long dst = (rank + d) % p;
      const int count = count_of(offsets, dst, "reprosgd::DataParallel::exchange_runs");
      for (long u = 0; u < k; ++u) {
        requests.emplace_back();
        check(MPI_Isend(rows + u * row_stride + offsets[static_cast<std::size_t>(dst)], count, MPI_FLOAT,
                        static_cast<int>(dst), tag, comm(), &requests.back()),
              "reprosgd::DataParallel::exchange_runs", "MPI_Isend(MPI_FLOAT)");
      }
    }
    check(wait_all(requests), "reprosgd::DataParallel::exchange_runs", "MPI_Waitall");
  }

  /**
   * One step of the Exact reduction's ring reduce-scatter (Exchange): send_count int64s to rank+1
   * while receiving recv_count from rank-1 (MPI_Sendrecv). @collective
   * @throws config_error on a count above 2^31 - 1; comm_error
   */
  void ring_step(const std::int64_t* send, long send_count, std::int64_t* recv, long recv_count) const {
    constexpr int tag = 0x5253;  // the duplicate communicator carries no other point-to-point traffic
    if (send_count > INT_MAX || recv_count > INT_MAX)
      throw config_error("reprosgd::DataParallel::ring_step: more than 2^31 - 1 values");
    const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
    check(MPI_Sendrecv(send, static_cast<int>(send_count), MPI_INT64_T, right, tag, recv, static_cast<int>(recv_count),
                       MPI_INT64_T, left, tag, comm(), MPI_STATUS_IGNORE),
          "reprosgd::DataParallel::ring_step", "MPI_Sendrecv(MPI_INT64_T)");
  }

  /**
   * Every rank's run of floats (counts[q] at data + displs[q]) to every rank, in place
   * (MPI_Allgatherv), and the AND of every rank's `ok`, agreed during the gather: a non-blocking
   * MPI_Iallreduce started before it and completed after it, so it costs no extra round trip
   * (Exchange). Returns the AND. @collective @throws config_error on a count above 2^31 - 1; comm_error
   */
  [[nodiscard]] bool allgather_runs(float* data, std::span<const long> counts, std::span<const long> displs, bool ok) {
    std::vector<int> c(counts.size()), d(displs.size());
    for (std::size_t q = 0; q < counts.size(); ++q) {
      if (counts[q] > INT_MAX || displs[q] > INT_MAX)
        throw config_error("reprosgd::DataParallel::allgather_runs: more than 2^31 - 1 floats");
      c[q] = static_cast<int>(counts[q]);
      d[q] = static_cast<int>(displs[q]);
    }
    // The agreement's buffers and request live in the heap, owned by this policy; if the gather
    // fails, MPI may still complete the pending agreement later, so they are kept to the end of
    // the process instead (keep_until_exit).
    if (!agreement_) agreement_ = std::make_unique<PendingAgreement>();
    PendingAgreement& a = *agreement_;
    a.in = ok ? 1 : 0;
    a.out = 1;
    a.request = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(&a.in, &a.out, 1, MPI_INT, MPI_LAND, comm(), &a.request),
          "reprosgd::DataParallel::allgather_runs", "MPI_Iallreduce(MPI_LAND)");
    const int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, c.data(), d.data(), MPI_FLOAT, comm());
    if (rc != MPI_SUCCESS) keep_until_exit(std::move(agreement_));
    check(rc, "reprosgd::DataParallel::allgather_runs", "MPI_Allgatherv(MPI_FLOAT)");
    check(MPI_Wait(&a.request, MPI_STATUS_IGNORE), "reprosgd::DataParallel::allgather_runs", "MPI_Wait");
    return a.out != 0;
  }

  // BuddyExchange (concepts/buddy_exchange.hpp): the buddy snapshots' traffic.

  /// Every rank's words, in rank order, into `all` (MPI_Allgather). @collective @throws comm_error
  void allgather_words(std::span<const std::int64_t> mine, std::span<std::int64_t> all) const {
    if (mine.size() > static_cast<std::size_t>(INT_MAX) || all.size() != mine.size() * static_cast<std::size_t>(size_))
      throw config_error("reprosgd::DataParallel::allgather_words: " + std::to_string(all.size()) +
                         " words to receive " + std::to_string(mine.size()) + " from each of " + std::to_string(size_) +
                         " ranks");
    check(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_INT64_T, all.data(),
                        static_cast<int>(mine.size()), MPI_INT64_T, comm()),
          "reprosgd::DataParallel::allgather_words", "MPI_Allgather");
  }

  /// Send `mine` to rank+1, receive rank-1's bytes (mod P) into `from_left`: the sizes first,
  /// then the bytes (MPI_Sendrecv twice). @collective @throws config_error above 2^31 - 1 bytes; comm_error
  void ring_shift_bytes(std::span<const std::byte> mine, std::vector<std::byte>& from_left) const {
    if (mine.size() > static_cast<std::size_t>(INT_MAX))
      throw config_error("reprosgd::DataParallel::ring_shift_bytes: " + std::to_string(mine.size()) +
                         " bytes are more than one MPI message (2^31 - 1 bytes)");
    constexpr int tag = 0x5b0d;
    const int right = (rank_ + 1) % size_, left = (rank_ - 1 + size_) % size_;
    long long sent = static_cast<long long>(mine.size()), arriving = 0;
    check(MPI_Sendrecv(&sent, 1, MPI_LONG_LONG, right, tag, &arriving, 1, MPI_LONG_LONG, left, tag, comm(),
                       MPI_STATUS_IGNORE),
          "reprosgd::DataParallel::ring_shift_bytes", "MPI_Sendrecv (sizes)");
    from_left.resize(static_cast<std::size_t>(arriving));
    check(MPI_Sendrecv(mine.data(), static_cast<int>(sent), MPI_BYTE, right, tag + 1, from_left.data(),
                       static_cast<int>(arriving), MPI_BYTE, left, tag + 1, comm(), MPI_STATUS_IGNORE),
          "reprosgd::DataParallel::ring_shift_bytes", "MPI_Sendrecv (bytes)");
  }

  /// Rank `root`'s bytes to every rank (the size first, then the bytes; MPI_Bcast twice).
  /// @collective @throws config_error above 2^31 - 1 bytes; comm_error
  void broadcast_bytes(std::vector<std::byte>& bytes, int root) const {
    long long n = static_cast<long long>(bytes.size());
    check(MPI_Bcast(&n, 1, MPI_LONG_LONG, root, comm()), "reprosgd::DataParallel::broadcast_bytes", "MPI_Bcast (size)");
    if (n > INT_MAX)
      throw config_error("reprosgd::DataParallel::broadcast_bytes: " + std::to_string(n) +
                         " bytes are more than one MPI message (2^31 - 1 bytes)");
    bytes.resize(static_cast<std::size_t>(n));
    check(MPI_Bcast(bytes.data(), static_cast<int>(n), MPI_BYTE, root, comm()), "reprosgd::DataParallel::broadcast_bytes",
          "MPI_Bcast (bytes)");
  }

  /**
   * Elementwise float SUM over ranks, in place, of `n` host floats (MPI_Allreduce(MPI_FLOAT,
   * MPI_SUM)): for the Native reduction only. The grouping of the additions is the MPI library's
   * choice, so the bits depend on P, the library and the placement (not rank-independent).
   * @collective @throws comm_error
   */
  void float_allreduce_sum(float* data, long n) const {
    for (long offset = 0; offset < n;) {
      const long count = n - offset < (1L << 30) ? n - offset : (1L << 30);
      check(MPI_Allreduce(MPI_IN_PLACE, data + offset, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm()),
            "reprosgd::DataParallel::float_allreduce_sum", "MPI_Allreduce(MPI_FLOAT, MPI_SUM)");
      offset += count;
    }
  }

  /**
   * Gather one value per micro-batch: each rank passes the values of the micro-batches it owns
   * (micro_batch_range(M).size() of them, in order) and every rank receives all M, in micro-batch
   * order, in `all` (MPI_Allgatherv with the counts and displacements of the micro-batch map).
   * `local` may alias this rank's segment of `all`.
   *
   * Sizes are checked on every rank and the verdict agreed before any data moves, so a wrong size
   * on one rank throws on all of them. @collective @deterministic
   * @throws config_error on a size, type or layout mismatch (on every rank); comm_error
   */
  template <class Local, class All>
    requires detail::HostArithmeticVector<Local> && detail::HostArithmeticVector<All> &&
             std::is_same_v<typename Local::non_const_value_type, typename All::non_const_value_type>
  void allgather_micro_batches(const Local& local, const All& all, long micro_batches) const {
    using T = typename All::non_const_value_type;
    const MicroBatchRange mine = micro_batch_range(micro_batches);
    const bool ok = static_cast<long>(local.extent(0)) == mine.size() &&
                    static_cast<long>(all.extent(0)) == micro_batches && local.span_is_contiguous() &&
                    all.span_is_contiguous() && micro_batches <= INT_MAX;
    if (!agree(ok))
      throw config_error("reprosgd::DataParallel::allgather_micro_batches: rank " + std::to_string(rank_) +
                         (ok ? " saw a size mismatch on another rank"
                             : " expected " + std::to_string(mine.size()) + " local and " +
                                   std::to_string(micro_batches) + " gathered contiguous values, got " +
                                   std::to_string(local.extent(0)) + " and " + std::to_string(all.extent(0))));
    std::vector<int> counts(static_cast<std::size_t>(size_)), displs(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      const MicroBatchRange range = micro_batch_range_of(r, size_, micro_batches);
      counts[static_cast<std::size_t>(r)] = static_cast<int>(range.size());
      displs[static_cast<std::size_t>(r)] = static_cast<int>(range.begin);
    }
    const T* send = local.data();
    const bool in_place = local.data() == all.data() + mine.begin;
    const MPI_Datatype type = detail::mpi_datatype<T>();
    check_(comm(),
           MPI_Allgatherv(in_place ? MPI_IN_PLACE : static_cast<const void*>(send), counts[rank_], type, all.data(),
                          counts.data(), displs.data(), type, comm()),
           "reprosgd::DataParallel::allgather_micro_batches", "MPI_Allgatherv");
  }

 protected:
  /**
   * What every collective calls with its return code, on success too. The default throws
   * comm_error when rc != MPI_SUCCESS. A plain function pointer rather than a virtual function:
   * DataParallel stays a non-polymorphic value type, and a derived policy (UlfmDataParallel)
   * installs one that agrees on the outcome across the surviving ranks. It receives only the
   * communicator, so a moved or sliced object never calls it with a dangling `this`.
   */
  using collective_check = void (*)(MPI_Comm comm, int rc, const char* who, const char* call);
  void set_collective_check(collective_check check) noexcept { check_ = check; }

  /// Replace the communicator by `comm` (taking ownership, freeing the old one) and refresh rank
  /// and size: for recovery after a failure. @throws comm_error if MPI_Comm_rank/size fail
  void adopt_communicator(detail::CommHandle comm) {
    int rank = 0, size = 1;
    detail::mpi_check(MPI_Comm_rank(comm.get(), &rank), "reprosgd::DataParallel::adopt_communicator: MPI_Comm_rank");
    detail::mpi_check(MPI_Comm_size(comm.get(), &size), "reprosgd::DataParallel::adopt_communicator: MPI_Comm_size");
    comm_ = std::move(comm);
    rank_ = rank;
    size_ = size;
  }

 private:
  static void throw_on_error(MPI_Comm, int rc, const char* who, const char* call) {
    if (rc != MPI_SUCCESS) detail::mpi_check(rc, (std::string(who) + ": " + call).c_str());
  }

  template <class View>
  void allreduce_in_place(const View& values, MPI_Op op, const char* who) const {
    using T = typename View::non_const_value_type;
    if (!values.span_is_contiguous())
      throw config_error(std::string(who) + ": the View is not contiguous");
    using Mem = typename View::memory_space;
    constexpr bool host = static_cast<bool>(Kokkos::SpaceAccessibility<Kokkos::HostSpace, Mem>::accessible);
    if (!host && !(std::is_same_v<Mem, typename ExecSpace::memory_space> && reads_space_memory_))
      throw config_error(std::string(who) + ": a View in " + Mem::name() +
                         " memory, which this MPI library cannot read (not device-aware: " +
                         describe(mpi_device_support()) + "); stage it through a host View");
    // MPI counts are int: send the vector in chunks of at most 2^30 elements.
    constexpr long chunk = 1L << 30;
    const long n = static_cast<long>(values.extent(0));
    T* data = values.data();
    long offset = 0;
    do {
      const long count = n - offset < chunk ? n - offset : chunk;
      check_(comm(),
             MPI_Allreduce(MPI_IN_PLACE, data + offset, static_cast<int>(count), detail::mpi_datatype<T>(), op, comm()),
             who, "MPI_Allreduce");
      offset += count;
    } while (offset < n);
  }

  /// The overflow agreement allgather_runs() overlaps with its gather: MPI's buffers and request.
  struct PendingAgreement {
    int in = 1;
    int out = 1;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  /// An agreement whose gather failed: MPI may still write into it, so it lives until the process
  /// exits (a few bytes per failure, reachable, so leak checkers stay quiet).
  static void keep_until_exit(std::unique_ptr<PendingAgreement> pending) {
    static std::mutex lock;
    static std::vector<std::unique_ptr<PendingAgreement>> kept;
    const std::lock_guard<std::mutex> guard(lock);
    kept.push_back(std::move(pending));
  }

  /// The length of run q, offsets[q+1] - offsets[q], as an MPI count.
  static int count_of(std::span<const long> offsets, long q, const char* who) {
    const long n = offsets[static_cast<std::size_t>(q + 1)] - offsets[static_cast<std::size_t>(q)];
    if (n > INT_MAX) throw config_error(std::string(who) + ": a run of more than 2^31 - 1 floats");
    return static_cast<int>(n);
  }

  /// MPI_Waitall, returning the first failed request's own error code instead of
  /// MPI_ERR_IN_STATUS (so that a dead peer is reported as a process failure).
  static int wait_all(std::vector<MPI_Request>& requests) {
    std::vector<MPI_Status> statuses(requests.size());
    const int rc = MPI_Waitall(static_cast<int>(requests.size()), requests.data(), statuses.data());
    if (rc != MPI_ERR_IN_STATUS) return rc;
    for (const MPI_Status& st : statuses)
      if (st.MPI_ERROR != MPI_SUCCESS && st.MPI_ERROR != MPI_ERR_PENDING) return st.MPI_ERROR;
    return rc;
  }

  ExecSpace space_{};
  std::unique_ptr<PendingAgreement> agreement_;
  detail::CommHandle comm_{};
  int rank_ = 0;
  int size_ = 1;
  bool reads_space_memory_ = true;
  collective_check check_ = &throw_on_error;
};

static_assert(Parallelism<DataParallel<>>);
static_assert(Reduction<Exact, DataParallel<>>);
static_assert(Exchange<DataParallel<>>);
static_assert(BuddyExchange<DataParallel<>>);

REPROSGD_END_NAMESPACE

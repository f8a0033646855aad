// SPDX-License-Identifier: BSD-3-Clause
/// @file Readers for IDX files (the MNIST format), plain or gzip-compressed, into a Dataset.
///
/// Format (Y. LeCun, "THE MNIST DATABASE of handwritten digits"): a big-endian 32-bit magic
/// 0x0000TTDD (TT the element type, DD the number of dimensions), DD big-endian 32-bit dimension
/// sizes, then the elements in row-major order. MNIST and Fashion-MNIST use unsigned bytes (TT =
/// 0x08): images 0x00000803 (count x rows x columns), labels 0x00000801 (count). Regression data
/// use big-endian IEEE 754 single precision (TT = 0x0D): features and targets of any shape whose
/// first dimension is the sample count.
///
/// Defences against damaged or forged files: every size in the header is checked against the file
/// before anything is allocated (plain files), or the data are read and stored incrementally, so
/// memory grows only with bytes actually decompressed (gzip); the data size is capped
/// (IdxReadOptions::max_data_bytes, 4 GiB by default); truncation and trailing bytes are errors.
#pragma once

#include <reprosgd/data/dataset.hpp>
#include <reprosgd/error.hpp>

#include <Kokkos_Core.hpp>
#include <zlib.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// The IDX element types read_idx() accepts (the other four of the format are refused).
enum class IdxType : std::uint8_t {
  ubyte = 0x08,    ///< unsigned byte
  float32 = 0x0D,  ///< IEEE 754 binary32, big-endian
};

/// The contents of one IDX file: its element type, its dimensions and its elements as the bytes
/// of the file (floats stay big-endian there; value() decodes them).
struct IdxArray {
  std::uint8_t type_code = 0x08;   ///< IDX element type: 0x08 (unsigned byte) or 0x0D (float)
  std::vector<std::size_t> dims;   ///< dimension sizes, outermost first (e.g. {60000, 28, 28})
  std::vector<std::uint8_t> data;  ///< product(dims) elements in row-major order, as stored

  [[nodiscard]] IdxType type() const noexcept { return static_cast<IdxType>(type_code); }
  /// Bytes per element: 1 or 4.
  [[nodiscard]] std::size_t element_size() const noexcept { return type() == IdxType::float32 ? 4 : 1; }
  /// The number of elements, the product of dims.
  [[nodiscard]] std::size_t element_count() const noexcept { return data.size() / element_size(); }
  /// The elements per sample: the product of every dimension but the first (1 for a 1-D file).
  [[nodiscard]] std::size_t row_width() const noexcept {
    std::size_t w = 1;
    for (std::size_t d = 1; d < dims.size(); ++d) w *= dims[d];
    return w;
  }
  /// Element i as a float: the byte's value (0..255) or the float's exact bits.
  [[nodiscard]] float value(std::size_t i) const noexcept {
    if (type() == IdxType::ubyte) return static_cast<float>(data[i]);
    const std::uint8_t* p = data.data() + 4 * i;
    const std::uint32_t bits = (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
                               std::uint32_t{p[3]};
    return std::bit_cast<float>(bits);
  }
};

/// The most dimensions read_idx() accepts (the format allows 255; no data set needs more than 4).
inline constexpr std::uint32_t idx_max_dimensions = 8;

/// Limits applied by read_idx().
struct IdxReadOptions {
  /// The largest data section accepted, in bytes (after decompression). A header that claims more
  /// is rejected before any allocation.
  std::uint64_t max_data_bytes = std::uint64_t{4} << 30;
};

namespace detail {

inline std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}
inline std::string hex8(std::uint32_t v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", v & 0xffu);
  return buf;
}

// A file opened for reading, plain or gzip (detected by the magic bytes 1f 8b, not the name).
// read() returns fewer bytes than asked only at the end of the data and throws on any error.
class IdxSource {
 public:
  IdxSource(const std::string& path, const char* who) : path_(path), who_(who) {
    int fd = -1;
    do {
      fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) fail_io("cannot open " + path + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int e = errno;
      ::close(fd);
      fail_io("cannot stat " + path + ": " + std::strerror(e));
    }
    fd_.fd = fd;  // owned from here on, also if the constructor throws
    if (S_ISDIR(st.st_mode)) fail_io("cannot open " + path + ": " + std::strerror(EISDIR));
    if (!S_ISREG(st.st_mode)) fail_io("cannot open " + path + ": not a regular file");
    file_size_ = static_cast<std::uint64_t>(st.st_size);
    unsigned char magic[2] = {0, 0};
    const std::size_t got = read_plain(magic, 2);
    if (got == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
      if (::lseek(fd_.fd, 0, SEEK_SET) != 0) fail_io("cannot seek in " + path + ": " + std::strerror(errno));
      gz_.gz = ::gzdopen(fd_.fd, "rb");
      if (gz_.gz == nullptr) fail_io("cannot open " + path + " as gzip: out of memory");
      fd_.fd = -1;  // gzclose() closes it now
      ::gzbuffer(gz_.gz, 1u << 18);
    } else {
      pending_.assign(magic, magic + got);
    }
  }
  IdxSource(const IdxSource&) = delete;
  IdxSource& operator=(const IdxSource&) = delete;
  ~IdxSource() = default;

  [[nodiscard]] bool gzip() const noexcept { return gz_.gz != nullptr; }
  // The total size of the byte stream when known before reading it (plain files only).
  [[nodiscard]] bool size_known() const noexcept { return gz_.gz == nullptr; }
  [[nodiscard]] std::uint64_t file_size() const noexcept { return file_size_; }

  std::size_t read(void* buffer, std::size_t n) {
    auto* out = static_cast<unsigned char*>(buffer);
    std::size_t done = 0;
    while (done < n && !pending_.empty()) {
      out[done++] = pending_.front();
      pending_.erase(pending_.begin());
    }
    if (done == n) return done;
    return done + (gz_.gz != nullptr ? read_gzip(out + done, n - done) : read_plain(out + done, n - done));
  }

  [[noreturn]] void fail_io(const std::string& what) const { throw io_error(std::string(who_) + ": " + what); }
  [[noreturn]] void fail_data(const std::string& what) const {
    throw data_error(std::string(who_) + ": " + path_ + ": " + what);
  }

 private:
  std::size_t read_plain(unsigned char* out, std::size_t n) {
    std::size_t done = 0;
    while (done < n) {
      const ::ssize_t r = ::read(fd_.fd, out + done, std::min<std::size_t>(n - done, std::size_t{1} << 30));
      if (r < 0) {
        if (errno == EINTR) continue;
        fail_io("cannot read " + path_ + ": " + std::strerror(errno));
      }
      if (r == 0) break;
      done += static_cast<std::size_t>(r);
    }
    return done;
  }

  std::size_t read_gzip(unsigned char* out, std::size_t n) {
    std::size_t done = 0;
    while (done < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - done, std::size_t{1} << 30));
      const int r = ::gzread(gz_.gz, out + done, chunk);
      if (r > 0) {
        done += static_cast<std::size_t>(r);
        continue;
      }
      // gzread() reports a stream cut short (Z_BUF_ERROR) as a plain end of data; only gzerror()
      // tells them apart, so it is asked after every short read.
      int code = Z_OK;
      const char* msg = ::gzerror(gz_.gz, &code);
      if (code == Z_ERRNO) fail_io("cannot read " + path_ + ": " + std::strerror(errno));
      if (code != Z_OK) {
        // zlib prefixes its message with the name given to gzdopen(), "<fd:3>: ": drop it.
        std::string text = msg != nullptr ? msg : "unknown error";
        if (text.rfind("<fd:", 0) == 0 && text.find(">: ") != std::string::npos) text.erase(0, text.find(">: ") + 3);
        fail_data("corrupt gzip stream: " + text);
      }
      break;  // a clean end of the stream
    }
    return done;
  }

  std::string path_;
  const char* who_;
  // Owners that close on destruction, so that a throw from the constructor leaks nothing.
  struct Fd {
    int fd = -1;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
  };
  struct Gz {
    gzFile gz = nullptr;
    ~Gz() {
      if (gz != nullptr) ::gzclose(gz);
    }
  };
  Fd fd_;
  Gz gz_;
  std::uint64_t file_size_ = 0;
  std::vector<unsigned char> pending_;  // bytes read to sniff the format, not yet consumed
};

inline std::uint32_t load_be32(const unsigned char* p) noexcept {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

inline IdxArray read_idx_impl(const std::string& path, const IdxReadOptions& options, const char* who) {
  IdxSource in(path, who);
  const char* unit = in.gzip() ? " uncompressed bytes" : " bytes";
  unsigned char head[4];
  const std::size_t got_magic = in.read(head, 4);
  if (got_magic == 0) in.fail_data("empty file");
  if (got_magic < 4)
    in.fail_data("truncated header: expected 4" + std::string(unit) + ", found " + std::to_string(got_magic));
  const std::uint32_t magic = load_be32(head);
  const std::uint32_t type = (magic >> 8) & 0xffu;
  const std::uint32_t ndims = magic & 0xffu;
  const bool supported = type == 0x08 || type == 0x0D;
  const bool idx_type = supported || type == 0x09 || type == 0x0B || type == 0x0C || type == 0x0E;
  const bool well_formed = (magic >> 16) == 0 && idx_type && ndims >= 1 && ndims <= idx_max_dimensions;
  if (well_formed && !supported)
    in.fail_data("unsupported IDX type " + hex8(type) + " (0x08, unsigned byte, and 0x0D, float, are supported)");
  if (!well_formed)
    in.fail_data("bad magic " + hex32(magic) + " (expected 0x0000TTDD: type TT 0x08 or 0x0D, DD 1 to " +
                 std::to_string(idx_max_dimensions) + " dimensions)");
  const std::uint64_t element_bytes = type == 0x0D ? 4 : 1;

  const std::uint64_t header_bytes = 4 + 4 * std::uint64_t{ndims};
  unsigned char dim_bytes[4 * idx_max_dimensions];
  const std::size_t got_dims = in.read(dim_bytes, 4 * ndims);
  if (got_dims < 4 * ndims)
    in.fail_data("truncated header: expected " + std::to_string(header_bytes) + unit + ", found " +
                 std::to_string(4 + got_dims));
  IdxArray out;
  out.type_code = static_cast<std::uint8_t>(type);
  std::uint64_t count = element_bytes;  // the data bytes
  bool over_limit = false;
  std::string shape;
  for (std::uint32_t d = 0; d < ndims; ++d) {
    const std::uint32_t extent = load_be32(dim_bytes + 4 * d);
    if (extent == 0)
      in.fail_data("dimension " + std::to_string(d) + " of " + std::to_string(ndims) + " is zero");
    out.dims.push_back(extent);
    shape += (d == 0 ? "" : " x ") + std::to_string(extent);
    // count <= max_data_bytes <= 2^64 / 2^32 is not guaranteed, so test before multiplying.
    if (!over_limit && count > options.max_data_bytes / extent) over_limit = true;
    if (!over_limit) count *= extent;
  }
  if (over_limit)
    in.fail_data("header claims " + shape + " elements" + (element_bytes > 1 ? " of 4 bytes" : "") +
                 ", more than the limit of " + std::to_string(options.max_data_bytes) + " data bytes");
  const std::uint64_t expected = header_bytes + count;
  // Plain file: compare with the real size before allocating, so a forged header costs nothing.
  if (in.size_known()) {
    if (in.file_size() < expected)
      in.fail_data("truncated: expected " + std::to_string(expected) + unit + ", found " +
                   std::to_string(in.file_size()));
    if (in.file_size() > expected)
      in.fail_data("trailing data: expected " + std::to_string(expected) + unit + ", found " +
                   std::to_string(in.file_size()));
    out.data.resize(static_cast<std::size_t>(count));
    const std::size_t got = in.read(out.data.data(), out.data.size());
    if (got < count)  // the file shrank while being read
      in.fail_data("truncated: expected " + std::to_string(expected) + unit + ", found " +
                   std::to_string(header_bytes + got));
    return out;
  }
  // gzip: the uncompressed size is unknown until the stream ends, so memory grows only with the
  // bytes actually inflated (a few bytes of gzip claiming 4 GiB allocate a few bytes).
  constexpr std::size_t chunk = std::size_t{16} << 20;
  std::size_t have = 0;
  while (have < count) {
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(count - have, chunk));
    out.data.resize(have + want);
    const std::size_t got = in.read(out.data.data() + have, want);
    have += got;
    if (got < want)
      in.fail_data("truncated: expected " + std::to_string(expected) + unit + ", found " +
                   std::to_string(header_bytes + have));
  }
  // Count trailing bytes (without storing them), up to the limit.
  std::uint64_t extra = 0;
  std::vector<unsigned char> scratch(1u << 16);
  for (;;) {
    const std::size_t got = in.read(scratch.data(), scratch.size());
    extra += got;
    if (got < scratch.size() || extra > options.max_data_bytes) break;
  }
  if (extra > 0)
    in.fail_data("trailing data: expected " + std::to_string(expected) + unit + ", found " +
                 (extra > options.max_data_bytes ? "more than " : "") + std::to_string(expected + extra));
  return out;
}

inline const char* idx_type_name(IdxType t) noexcept { return t == IdxType::ubyte ? "unsigned byte" : "float"; }

inline void require_idx_type(const IdxArray& a, IdxType want, const std::string& path, const char* who) {
  if (a.type() != want)
    throw data_error(std::string(who) + ": " + path + ": expected " + (want == IdxType::ubyte ? "unsigned bytes" : "floats") +
                     " (IDX type " + hex8(static_cast<std::uint32_t>(want)) + "), found " + hex8(a.type_code) + " (" +
                     idx_type_name(a.type()) + ")");
}

// The N x (product of the other dimensions) features of an IDX array: floats as stored, bytes as
// byte / 255.0f (through a 256-entry table of exactly those bits, computed once).
inline Dataset<Kokkos::HostSpace>::features_type idx_features(const IdxArray& x) {
  Dataset<Kokkos::HostSpace>::features_type out(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("reprosgd::idx_features")), x.dims[0], x.row_width());
  float* dst = out.data();
  const std::size_t total = x.element_count();
  if (x.type() == IdxType::ubyte) {
    float table[256];
    for (int v = 0; v < 256; ++v) table[v] = static_cast<float>(v) / 255.0f;
    const std::uint8_t* src = x.data.data();
    for (std::size_t k = 0; k < total; ++k) dst[k] = table[src[k]];
  } else {
    for (std::size_t k = 0; k < total; ++k) dst[k] = x.value(k);
  }
  return out;
}

}  // namespace detail

/**
 * Reads one IDX file of unsigned bytes (type 0x08) or big-endian floats (0x0D) with 1 to 8
 * dimensions, plain or gzip-compressed (recognised by its first two bytes, 1f 8b).
 *
 * @param path the file.
 * @param options limits (IdxReadOptions::max_data_bytes).
 * @returns its type, dimensions and bytes.
 * @throws io_error when the file cannot be opened or read ("reprosgd::read_idx: cannot open <path>:
 *         No such file or directory"), is a directory or is not a regular file.
 * @throws data_error, messages "reprosgd::read_idx: <path>: " followed by one of: "empty file",
 *         "truncated header: expected 16 bytes, found 9", "bad magic 0x12345678 (expected
 *         0x0000TTDD: type TT 0x08 or 0x0D, DD 1 to 8 dimensions)", "unsupported IDX type 0x0B
 *         (0x08, unsigned byte, and 0x0D, float, are supported)", "dimension 1 of 3 is zero",
 *         "header claims 60000 x 100000 x 100000 elements, more than the limit of 4294967296 data
 *         bytes" (floats: "elements of 4 bytes"), "truncated: expected 7856 bytes, found 7000",
 *         "trailing data: expected 7856 bytes, found 7860", "corrupt gzip stream: <zlib's message>"
 *         (gzip sizes say "uncompressed bytes").
 *
 * Not collective; every rank that calls it reads the file.
 */
[[nodiscard]] inline IdxArray read_idx(const std::string& path, const IdxReadOptions& options = {}) {
  return detail::read_idx_impl(path, options, "reprosgd::read_idx");
}

/**
 * Reads an image file (3 dimensions: count x rows x columns) and a label file (1 dimension) into a
 * host Dataset. Feature j of sample i is pixel j of image i (row-major) divided by 255 in float:
 * `static_cast<float>(pixel) / 255.0f`, one correctly rounded IEEE division, the same everywhere.
 *
 * @param images path of the image file (e.g. train-images-idx3-ubyte.gz).
 * @param labels path of the label file (e.g. train-labels-idx1-ubyte.gz).
 * @param num_classes the number of classes; every label must be below it.
 * @throws everything read_idx() throws (with the prefix "reprosgd::read_idx_dataset"), and
 *         data_error when a file holds floats ("reprosgd::read_idx_dataset: <path>: expected unsigned
 *         bytes (IDX type 0x08), found 0x0D (float)"), the image file does not have 3 dimensions or
 *         the label file 1, when the
 *         counts differ ("reprosgd::read_idx_dataset: 100 images in <images> but 99 labels in
 *         <labels>"), or a label is out of range ("reprosgd::read_idx_dataset: <labels>: label 10 at
 *         index 5 is outside [0, 10)"); config_error when num_classes is not in [1, 256].
 */
[[nodiscard]] inline Dataset<Kokkos::HostSpace> read_idx_dataset(const std::string& images, const std::string& labels,
                                                                 int num_classes = 10,
                                                                 const IdxReadOptions& options = {}) {
  const char* who = "reprosgd::read_idx_dataset";
  if (num_classes < 1 || num_classes > 256)
    throw config_error(std::string(who) + ": num_classes must be in [1, 256] for byte labels, got " +
                       std::to_string(num_classes));
  const IdxArray x = detail::read_idx_impl(images, options, who);
  detail::require_idx_type(x, IdxType::ubyte, images, who);
  if (x.dims.size() != 3)
    throw data_error(std::string(who) + ": " + images + ": expected an image file with 3 dimensions (magic 0x00000803), found " +
                     std::to_string(x.dims.size()));
  const IdxArray y = detail::read_idx_impl(labels, options, who);
  detail::require_idx_type(y, IdxType::ubyte, labels, who);
  if (y.dims.size() != 1)
    throw data_error(std::string(who) + ": " + labels + ": expected a label file with 1 dimension (magic 0x00000801), found " +
                     std::to_string(y.dims.size()));
  if (x.dims[0] != y.dims[0])
    throw data_error(std::string(who) + ": " + std::to_string(x.dims[0]) + " images in " + images + " but " +
                     std::to_string(y.dims[0]) + " labels in " + labels);
  const std::size_t n = x.dims[0];
  for (std::size_t i = 0; i < n; ++i)
    if (y.data[i] >= num_classes)
      throw data_error(std::string(who) + ": " + labels + ": label " + std::to_string(y.data[i]) + " at index " +
                       std::to_string(i) + " is outside [0, " + std::to_string(num_classes) + ")");

  Dataset<Kokkos::HostSpace> out;
  out.num_classes = num_classes;
  out.features = detail::idx_features(x);  // rows x columns pixels per image, row-major
  out.labels = Dataset<Kokkos::HostSpace>::labels_type(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("reprosgd::idx_labels")), n);
  for (std::size_t i = 0; i < n; ++i) out.labels(i) = static_cast<std::int32_t>(y.data[i]);
  return out;
}

/**
 * Reads an IDX file of features, unsigned bytes or floats, as an N x F host matrix. The first
 * dimension is the sample count N; the others are flattened in row-major order (F is their
 * product: a file N x 8, N x 2 x 4 or, for one feature, N). A float is kept as stored (its exact
 * bits); a byte becomes `static_cast<float>(byte) / 255.0f`, as read_idx_dataset() reads pixels.
 *
 * @throws everything read_idx() throws, with the prefix "reprosgd::read_idx_features".
 */
[[nodiscard]] inline Dataset<Kokkos::HostSpace>::features_type read_idx_features(const std::string& path,
                                                                                 const IdxReadOptions& options = {}) {
  return detail::idx_features(detail::read_idx_impl(path, options, "reprosgd::read_idx_features"));
}

/**
 * Reads a regression data set from two IDX files: the features (as read_idx_features() reads
 * them) and the targets, floats of shape N (one target per sample) or N x ... (T, the product of
 * the other dimensions, per sample), kept as stored. Non-finite values are validate_finite()'s to
 * find (as for make_regression_dataset()).
 *
 * @param features path of the features file (types 0x08 or 0x0D).
 * @param targets path of the targets file (type 0x0D).
 * @throws everything read_idx() throws (with the prefix "reprosgd::read_idx_regression_dataset"),
 *         and data_error when the targets are not floats ("reprosgd::read_idx_regression_dataset:
 *         <targets>: expected floats (IDX type 0x0D), found 0x08 (unsigned byte)") or the counts
 *         differ ("reprosgd::read_idx_regression_dataset: 100 samples in <features> but 99 in
 *         <targets>").
 */
[[nodiscard]] inline Dataset<Kokkos::HostSpace> read_idx_regression_dataset(const std::string& features,
                                                                            const std::string& targets,
                                                                            const IdxReadOptions& options = {}) {
  const char* who = "reprosgd::read_idx_regression_dataset";
  const IdxArray x = detail::read_idx_impl(features, options, who);
  const IdxArray t = detail::read_idx_impl(targets, options, who);
  detail::require_idx_type(t, IdxType::float32, targets, who);
  if (x.dims[0] != t.dims[0])
    throw data_error(std::string(who) + ": " + std::to_string(x.dims[0]) + " samples in " + features + " but " +
                     std::to_string(t.dims[0]) + " in " + targets);
  Dataset<Kokkos::HostSpace> out;
  out.features = detail::idx_features(x);
  out.targets = Dataset<Kokkos::HostSpace>::targets_type(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("reprosgd::idx_targets")), t.dims[0], t.row_width());
  for (std::size_t k = 0; k < t.element_count(); ++k) out.targets.data()[k] = t.value(k);
  return out;
}

REPROSGD_END_NAMESPACE

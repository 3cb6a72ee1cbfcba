#include "showers/chunk_guard.h"

#include <zlib.h>

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "showers/hdf5_common.h"

namespace gantry::showers::h5 {
namespace {

// Inflates the zlib stream `in` (as HDF5's deflate filter writes it) into no buffer and returns
// the number of bytes it holds, stopping once it passes `most`; -1 when the stream is damaged or
// does not end within `in`.
int64_t InflatedSize(const unsigned char* in, size_t size, uint64_t most) {
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return -1;
  std::array<unsigned char, 1 << 16> sink;
  z.next_in = const_cast<unsigned char*>(in);
  z.avail_in = static_cast<uInt>(size);
  int rc = Z_OK;
  while (rc == Z_OK && z.total_out <= most) {
    z.next_out = sink.data();
    z.avail_out = static_cast<uInt>(sink.size());
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc == Z_BUF_ERROR) break;  // no progress: the input ended before the stream did
  }
  const int64_t total = static_cast<int64_t>(z.total_out);
  inflateEnd(&z);
  if (total > static_cast<int64_t>(most)) return total;
  return rc == Z_STREAM_END ? total : -1;
}

}  // namespace

absl::StatusOr<std::shared_ptr<ChunkGuard>> ChunkGuard::Create(
    const std::string& path, const std::string& quoted, hid_t dcpl, std::vector<hsize_t> dims,
    std::vector<hsize_t> chunk, uint64_t chunk_bytes) {
  std::shared_ptr<ChunkGuard> guard(new ChunkGuard());
  guard->quoted_ = quoted;
  guard->chunk_bytes_ = chunk_bytes;
  uint64_t chunks = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    guard->along_.push_back(dims[i] / chunk[i] + (dims[i] % chunk[i] != 0));
    chunks *= guard->along_.back();  // bounded by the caller (ShowerFileLimits::max_chunks)
  }
  guard->checked_.assign(chunks, false);
  guard->dims_ = std::move(dims);
  guard->chunk_ = std::move(chunk);

  // The order HDF5's writers use: shuffle, then deflate, then the checksum over the result.
  const int filters = H5Pget_nfilters(dcpl);
  if (filters < 0) return Loss(path, absl::StrCat("cannot read the filters of ", quoted));
  int last = -1;
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0;
    size_t values = 0;
    char name[64] = {0};
    const H5Z_filter_t id = H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &values, nullptr,
                                           sizeof(name), name, nullptr);
    const int rank = id == H5Z_FILTER_SHUFFLE      ? 0
                     : id == H5Z_FILTER_DEFLATE    ? 1
                     : id == H5Z_FILTER_FLETCHER32 ? 2
                                                   : -1;
    if (rank < 0 || rank <= last) {
      return Invalid(path, absl::StrCat(quoted, " is filtered with HDF5 filter ", id,
                                        rank < 0 ? " (not shuffle, deflate or fletcher32)"
                                                 : " out of order or twice",
                                        "; gantry reads chunks filtered with shuffle, deflate "
                                        "and fletcher32 only, in that order"));
    }
    last = rank;
    guard->filtered_ = true;
    guard->deflate_ |= id == H5Z_FILTER_DEFLATE;
    guard->fletcher32_ |= id == H5Z_FILTER_FLETCHER32;
  }
  unsigned options = 0;
  if (H5Pget_chunk_opts(dcpl, &options) < 0) {
    return Loss(path, absl::StrCat("cannot read the chunk options of ", quoted));
  }
  if (guard->filtered_ && (options & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS) != 0) {
    return Invalid(path, absl::StrCat(quoted,
                                      " leaves its partial edge chunks unfiltered; gantry reads "
                                      "only files whose every chunk is filtered"));
  }
  return guard;
}

absl::Status ChunkGuard::CheckRows(const std::string& path, hid_t dataset, int64_t first,
                                   int64_t count) {
  if (count <= 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  const size_t rank = dims_.size();
  // Chunk coordinates: along axis 0 those holding the rows, along the others all of them.
  std::vector<hsize_t> lo(rank, 0), hi = along_, at(rank, 0);
  lo[0] = static_cast<hsize_t>(first) / chunk_[0];
  hi[0] = static_cast<hsize_t>(first + count - 1) / chunk_[0] + 1;
  at = lo;
  std::vector<hsize_t> offset(rank);
  while (true) {
    uint64_t index = 0;
    for (size_t i = 0; i < rank; ++i) index = index * along_[i] + at[i];
    if (!checked_[index]) {
      for (size_t i = 0; i < rank; ++i) offset[i] = at[i] * chunk_[i];
      RETURN_IF_ERROR(CheckChunk(path, dataset, offset));
      checked_[index] = true;
    }
    size_t axis = rank;
    while (axis > 0) {
      --axis;
      if (++at[axis] < hi[axis]) break;
      at[axis] = lo[axis];
      if (axis == 0) return absl::OkStatus();
    }
  }
}

absl::Status ChunkGuard::CheckChunk(const std::string& path, hid_t dataset,
                                    const std::vector<hsize_t>& offset) {
  const std::string which = absl::StrCat("chunk ", ShapeText(offset), " of ", quoted_);
  unsigned mask = 0;
  haddr_t address = HADDR_UNDEF;
  hsize_t stored = 0;
  if (H5Dget_chunk_info_by_coord(dataset, offset.data(), &mask, &address, &stored) < 0) {
    return Loss(path, absl::StrCat("cannot look up ", which));
  }
  if (address == HADDR_UNDEF) return Invalid(path, absl::StrCat(which, " is not stored"));
  const uint64_t checksum = fletcher32_ ? 4 : 0;
  if (!deflate_) {
    if (mask != 0 || stored != chunk_bytes_ + checksum) {
      return Invalid(
          path, absl::StrCat(which, " stores ", stored, " bytes (filter mask ", mask, "); its ",
                             chunk_bytes_, " bytes need ", chunk_bytes_ + checksum));
    }
    return absl::OkStatus();
  }
  if (mask != 0) {
    return Invalid(path, absl::StrCat(which, " skips some of its filters (filter mask ", mask,
                                      "); gantry reads only chunks with every filter applied"));
  }
  // Deflate's worst case grows data by 5 bytes per 16 KB block plus a 6-byte header and trailer.
  const uint64_t most_stored = chunk_bytes_ + chunk_bytes_ / 1000 + 64 + checksum;
  if (stored <= checksum || stored > most_stored) {
    return Invalid(path, absl::StrCat(which, " stores ", stored, " bytes, not a deflated chunk of ",
                                      chunk_bytes_, " bytes"));
  }
  std::vector<unsigned char> raw(stored);
  uint32_t applied = 0;
  if (H5Dread_chunk(dataset, H5P_DEFAULT, offset.data(), &applied, raw.data()) < 0) {
    return Loss(path, absl::StrCat("cannot read ", which));
  }
  const int64_t inflated = InflatedSize(raw.data(), stored - checksum, chunk_bytes_);
  // A damaged stream is lost data, as when libhdf5's own inflate fails.
  auto lost = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(path, ": ", which, what));
  };
  if (inflated < 0) return lost(" is not a complete deflate stream");
  if (inflated > static_cast<int64_t>(chunk_bytes_)) {
    return lost(absl::StrCat(" inflates to more than its ", chunk_bytes_, " bytes"));
  }
  if (inflated < static_cast<int64_t>(chunk_bytes_)) {
    return lost(absl::StrCat(" inflates to ", inflated, " bytes, not its ", chunk_bytes_));
  }
  return absl::OkStatus();
}

}  // namespace gantry::showers::h5

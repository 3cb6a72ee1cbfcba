#include "showers/chunk_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace gantry::showers::h5 {
namespace {

constexpr uint64_t kChecksumBytes = 4;
// Decoded chunks kept at most, whatever the cache's bytes: the cache is searched linearly, and a
// file of many tiny chunks must not make each read a search of thousands.
constexpr size_t kMostCachedChunks = 128;

// HDF5's Fletcher32 (H5_checksum_fletcher32): 16-bit big-endian words, an odd last byte as the
// high byte of a word, both sums folded to 16 bits every 360 words.
uint32_t Fletcher32(const unsigned char* data, size_t size) {
  uint32_t sum1 = 0, sum2 = 0;
  size_t words = size / 2;
  while (words > 0) {
    size_t block = std::min<size_t>(words, 360);
    words -= block;
    for (; block > 0; --block, data += 2) {
      sum1 += (uint32_t{data[0]} << 8) | data[1];
      sum2 += sum1;
    }
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  if (size % 2 != 0) {
    sum1 += uint32_t{data[0]} << 8;
    sum2 += sum1;
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  sum1 = (sum1 & 0xffff) + (sum1 >> 16);
  sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  return (sum2 << 16) | sum1;
}

// Whether the checksum stored little-endian after `size` bytes of `data` is theirs. libhdf5 also
// takes the byte-swapped value that its releases before 1.6.3 wrote on little-endian machines.
bool ChecksumMatches(const unsigned char* data, size_t size) {
  const unsigned char* s = data + size;
  const uint32_t stored =
      uint32_t{s[0]} | uint32_t{s[1]} << 8 | uint32_t{s[2]} << 16 | uint32_t{s[3]} << 24;
  const uint32_t sum = Fletcher32(data, size);
  const uint32_t swapped = ((sum & 0x00ff00ff) << 8) | ((sum >> 8) & 0x00ff00ff);
  return stored == sum || stored == swapped;
}

// Inflates the zlib stream `in` (as HDF5's deflate filter writes it) into out[0, size): the
// number of bytes it holds when that is at most `size`, size + 1 when it holds more, -1 when it
// is damaged or does not end within `in`.
int64_t Inflate(const unsigned char* in, size_t in_size, unsigned char* out, uint64_t size) {
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return -1;
  z.next_in = const_cast<unsigned char*>(in);
  z.avail_in = static_cast<uInt>(in_size);  // bounded by the chunk checks (< 2^32)
  z.next_out = out;
  z.avail_out = static_cast<uInt>(size);
  int rc = Z_OK;
  while (rc == Z_OK) rc = inflate(&z, Z_NO_FLUSH);
  if (rc == Z_BUF_ERROR && z.avail_out == 0) {
    // The chunk is full: the stream must end here, with nothing more to give.
    unsigned char extra = 0;
    z.next_out = &extra;
    z.avail_out = 1;
    rc = inflate(&z, Z_NO_FLUSH);
  }
  const uint64_t total = z.total_out;
  inflateEnd(&z);
  if (total > size) return static_cast<int64_t>(size) + 1;
  return rc == Z_STREAM_END ? static_cast<int64_t>(total) : -1;
}

// Undoes HDF5's shuffle filter: byte j of element i was stored at j * elements + i.
void Unshuffle(const unsigned char* in, size_t element_bytes, size_t elements, unsigned char* out) {
  for (size_t j = 0; j < element_bytes; ++j) {
    const unsigned char* plane = in + j * elements;
    for (size_t i = 0; i < elements; ++i) out[i * element_bytes + j] = plane[i];
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<ChunkReader>> ChunkReader::Create(
    const std::string& path, const std::string& quoted, hid_t dataset, hid_t dcpl,
    std::vector<hsize_t> dims, std::vector<hsize_t> chunk, uint64_t chunk_bytes,
    int64_t cache_bytes) {
  std::shared_ptr<ChunkReader> reader(new ChunkReader());
  reader->quoted_ = quoted;
  reader->chunk_bytes_ = chunk_bytes;
  reader->cache_bytes_ = cache_bytes;
  reader->type_ = Handle(H5Dget_type(dataset), H5Tclose);
  reader->element_bytes_ = reader->type_.ok() ? H5Tget_size(reader->type_.get()) : 0;
  if (reader->element_bytes_ == 0) {
    return Loss(path, absl::StrCat("cannot read the element type of ", quoted));
  }
  reader->native_float_ = H5Tequal(reader->type_.get(), H5T_NATIVE_FLOAT) > 0;
  reader->chunk_elements_ = chunk_bytes / reader->element_bytes_;
  for (size_t i = 0; i < dims.size(); ++i) {
    reader->along_.push_back(dims[i] / chunk[i] + (dims[i] % chunk[i] != 0));
  }
  reader->dims_ = std::move(dims);
  reader->chunk_ = std::move(chunk);

  // The order HDF5's writers use: shuffle, then deflate, then the checksum over the result.
  const int filters = H5Pget_nfilters(dcpl);
  if (filters < 0) return Loss(path, absl::StrCat("cannot read the filters of ", quoted));
  int last = -1;
  bool filtered = false;
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0;
    unsigned values[8] = {0};
    size_t count = 8;
    char name[64] = {0};
    const H5Z_filter_t id = H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &count, values,
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
    // libhdf5 shuffles by the element size it stores as the filter's first value.
    if (id == H5Z_FILTER_SHUFFLE && (count < 1 || values[0] != reader->element_bytes_)) {
      return Invalid(path,
                     absl::StrCat(quoted, " is shuffled in units of ", count < 1 ? 0 : values[0],
                                  " bytes, not its elements' ", reader->element_bytes_));
    }
    last = rank;
    filtered = true;
    reader->shuffle_ |= id == H5Z_FILTER_SHUFFLE;
    reader->deflate_ |= id == H5Z_FILTER_DEFLATE;
    reader->fletcher32_ |= id == H5Z_FILTER_FLETCHER32;
  }
  unsigned options = 0;
  if (H5Pget_chunk_opts(dcpl, &options) < 0) {
    return Loss(path, absl::StrCat("cannot read the chunk options of ", quoted));
  }
  if (filtered && (options & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS) != 0) {
    return Invalid(path, absl::StrCat(quoted,
                                      " leaves its partial edge chunks unfiltered; gantry reads "
                                      "only files whose every chunk is filtered"));
  }
  return reader;
}

absl::Status ChunkReader::ReadRows(const std::string& path, hid_t dataset, int64_t first,
                                   int64_t count, float* out) {
  if (count <= 0) return absl::OkStatus();
  const size_t rank = dims_.size();
  // Chunk coordinates: along axis 0 those holding the rows, along the others all of them.
  std::vector<hsize_t> lo(rank, 0), hi = along_;
  lo[0] = static_cast<hsize_t>(first) / chunk_[0];
  hi[0] = static_cast<hsize_t>(first + count - 1) / chunk_[0] + 1;
  std::vector<hsize_t> at = lo;
  while (true) {
    uint64_t index = 0;
    for (size_t i = 0; i < rank; ++i) index = index * along_[i] + at[i];
    ASSIGN_OR_RETURN(const Decoded decoded, Chunk(path, dataset, at, index));
    CopyOut(at, decoded.get(), first, count, out);
    size_t axis = rank;
    while (axis > 0) {
      --axis;
      if (++at[axis] < hi[axis]) break;
      at[axis] = lo[axis];
      if (axis == 0) return absl::OkStatus();
    }
  }
}

absl::StatusOr<ChunkReader::Decoded> ChunkReader::Chunk(const std::string& path, hid_t dataset,
                                                        const std::vector<hsize_t>& at,
                                                        uint64_t index) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < cache_.size(); ++i) {
      if (cache_[i].first != index) continue;
      std::rotate(cache_.begin(), cache_.begin() + static_cast<std::ptrdiff_t>(i),
                  cache_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      return cache_.front().second;
    }
  }
  std::vector<hsize_t> offset(at.size());
  for (size_t i = 0; i < at.size(); ++i) offset[i] = at[i] * chunk_[i];
  ASSIGN_OR_RETURN(Decoded decoded, Decode(path, dataset, offset));
  // Every chunk of a dataset decodes to the same size: the cache holds a number of them.
  const int64_t bytes = static_cast<int64_t>(chunk_elements_ * sizeof(float));
  const size_t most = std::min(static_cast<size_t>(cache_bytes_ / bytes), kMostCachedChunks);
  if (most == 0) return decoded;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [cached, values] : cache_) {
    if (cached == index) return values;  // another thread decoded it meanwhile
  }
  cache_.insert(cache_.begin(), {index, decoded});
  if (cache_.size() > most) cache_.resize(most);
  return decoded;
}

absl::StatusOr<ChunkReader::Decoded> ChunkReader::Decode(const std::string& path, hid_t dataset,
                                                         const std::vector<hsize_t>& offset) const {
  const std::string which = absl::StrCat("chunk ", ShapeText(offset), " of ", quoted_);
  auto lost = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(path, ": ", which, what));
  };
  unsigned mask = 0;
  haddr_t address = HADDR_UNDEF;
  hsize_t stored = 0;
  if (H5Dget_chunk_info_by_coord(dataset, offset.data(), &mask, &address, &stored) < 0) {
    return Loss(path, absl::StrCat("cannot look up ", which));
  }
  if (address == HADDR_UNDEF) return Invalid(path, absl::StrCat(which, " is not stored"));
  const uint64_t checksum = fletcher32_ ? kChecksumBytes : 0;
  if (mask != 0) {
    return Invalid(path, absl::StrCat(which, " skips some of its filters (filter mask ", mask,
                                      "); gantry reads only chunks with every filter applied"));
  }
  if (!deflate_ && stored != chunk_bytes_ + checksum) {
    return Invalid(path, absl::StrCat(which, " stores ", stored, " bytes; its ", chunk_bytes_,
                                      " bytes need ", chunk_bytes_ + checksum));
  }
  // Deflate's worst case grows data by 5 bytes per 16 KB block plus a 6-byte header and trailer.
  const uint64_t most_stored = chunk_bytes_ + chunk_bytes_ / 1000 + 64 + checksum;
  if (deflate_ && (stored <= checksum || stored > most_stored)) {
    return Invalid(path, absl::StrCat(which, " stores ", stored, " bytes, not a deflated chunk of ",
                                      chunk_bytes_, " bytes"));
  }
  std::unique_ptr<unsigned char[]> raw(new unsigned char[stored]);
  uint32_t applied = 0;
  if (H5Dread_chunk(dataset, H5P_DEFAULT, offset.data(), &applied, raw.get()) < 0) {
    return Loss(path, absl::StrCat("cannot read ", which));
  }
  const size_t payload = static_cast<size_t>(stored - checksum);
  if (fletcher32_ && !ChecksumMatches(raw.get(), payload)) {
    return lost(" fails its Fletcher32 checksum");
  }
  // The chunk's elements in the file's type go to `target`: the floats themselves when an
  // element is at most a float wide (converted in place), else a wider buffer.
  std::shared_ptr<float[]> values(new float[chunk_elements_]);
  std::unique_ptr<unsigned char[]> wide;
  unsigned char* target = reinterpret_cast<unsigned char*>(values.get());
  if (element_bytes_ > sizeof(float)) {
    wide.reset(new unsigned char[chunk_bytes_]);
    target = wide.get();
  }
  const bool shuffled = shuffle_ && element_bytes_ > 1 && chunk_elements_ > 1;
  std::unique_ptr<unsigned char[]> plain;  // the filters' output before the shuffle is undone
  unsigned char* inflate_to = target;
  if (shuffled && deflate_) {
    plain.reset(new unsigned char[chunk_bytes_]);
    inflate_to = plain.get();
  }
  if (deflate_) {
    // A damaged stream is lost data, as when libhdf5's own inflate fails.
    const int64_t inflated = Inflate(raw.get(), payload, inflate_to, chunk_bytes_);
    if (inflated < 0) return lost(" is not a complete deflate stream");
    if (inflated > static_cast<int64_t>(chunk_bytes_)) {
      return lost(absl::StrCat(" inflates to more than its ", chunk_bytes_, " bytes"));
    }
    if (inflated < static_cast<int64_t>(chunk_bytes_)) {
      return lost(absl::StrCat(" inflates to ", inflated, " bytes, not its ", chunk_bytes_));
    }
  }
  const unsigned char* filtered = deflate_ ? inflate_to : raw.get();
  if (shuffled) {
    Unshuffle(filtered, element_bytes_, chunk_elements_, target);
  } else if (!deflate_) {
    std::memcpy(target, raw.get(), chunk_bytes_);
  }
  if (!native_float_) {
    if (H5Tconvert(type_.get(), H5T_NATIVE_FLOAT, chunk_elements_, target, nullptr, H5P_DEFAULT) <
        0) {
      return Loss(path, absl::StrCat("cannot convert the values of ", which, " to float"));
    }
    if (wide != nullptr) std::memcpy(values.get(), wide.get(), chunk_elements_ * sizeof(float));
  }
  return Decoded(std::move(values));
}

void ChunkReader::CopyOut(const std::vector<hsize_t>& at, const float* decoded, int64_t first,
                          int64_t count, float* out) const {
  const size_t rank = dims_.size();
  // Per axis: the chunk's origin in the dataset and the part of the chunk [lo, hi) to copy.
  std::vector<uint64_t> origin(rank), lo(rank, 0), hi(rank);
  for (size_t i = 0; i < rank; ++i) {
    origin[i] = at[i] * chunk_[i];
    hi[i] = std::min<uint64_t>(chunk_[i], dims_[i] - origin[i]);  // edge chunks overhang
  }
  const uint64_t row_lo = static_cast<uint64_t>(first), row_hi = row_lo + count;
  lo[0] = std::max(row_lo, origin[0]) - origin[0];
  hi[0] = std::min(row_hi, origin[0] + hi[0]) - origin[0];
  // Strides of the chunk and of `out` (rows from `first`, every trailing dimension).
  std::vector<uint64_t> chunk_stride(rank, 1), out_stride(rank, 1);
  for (size_t i = rank - 1; i > 0; --i) {
    chunk_stride[i - 1] = chunk_stride[i] * chunk_[i];
    out_stride[i - 1] = out_stride[i] * dims_[i];
  }
  const size_t run = static_cast<size_t>(hi[rank - 1] - lo[rank - 1]);
  std::vector<uint64_t> k = lo;  // position in the chunk; the last axis is copied as a run
  while (true) {
    uint64_t from = 0, to = 0;
    for (size_t i = 0; i < rank; ++i) {
      from += k[i] * chunk_stride[i];
      to += (origin[i] + k[i] - (i == 0 ? row_lo : 0)) * out_stride[i];
    }
    std::memcpy(out + to, decoded + from, run * sizeof(float));
    if (rank == 1) return;
    size_t axis = rank - 1;
    while (axis > 0) {
      --axis;
      if (++k[axis] < hi[axis]) break;
      k[axis] = lo[axis];
      if (axis == 0) return;
    }
  }
}

}  // namespace gantry::showers::h5

// The layouts read here are those of the HDF5 file format specification, version 3: object header
// versions 1 and 2 with their continuation blocks, the attribute message (versions 1-3), the
// attribute info message, the datatype message's common 8 bytes and the dataspace message
// (versions 1 and 2).
#include "showers/attribute_guard.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "showers/checked_file_driver.h"
#include "showers/hdf5_common.h"

namespace gantry::showers::h5 {
namespace {

// Object header chunks hold a few KB; a larger one, or more of them, is not read here.
constexpr uint64_t kMaxChunkBytes = uint64_t{1} << 20;
constexpr size_t kMaxChunks = 64;
// A local heap holds a group's link names: KBs. One the driver can read (inside the file) up to
// this size is walked; a larger one is refused (libhdf5 would read it all too).
constexpr uint64_t kMaxHeapBytes = uint64_t{64} << 20;

constexpr uint16_t kAttributeMessage = 0x000C;
constexpr uint16_t kContinuationMessage = 0x0010;
constexpr uint16_t kAttributeInfoMessage = 0x0015;
constexpr uint16_t kSymbolTableMessage = 0x0011;
constexpr uint64_t kHeapFreeNull = 1;  // H5HL_FREE_NULL: the end of a local heap's free list

AttributeCheck Unchecked(std::string why) { return {AttributeVerdict::kUnchecked, std::move(why)}; }

// A bounds-checked little-endian view of bytes read from the file.
class Bytes {
 public:
  explicit Bytes(const std::string& b) : b_(b) {}
  size_t size() const { return b_.size(); }
  bool Has(uint64_t at, uint64_t n) const { return at <= b_.size() && n <= b_.size() - at; }
  // The little-endian value of `width` bytes at `at`; the caller checked Has(at, width).
  uint64_t Le(uint64_t at, size_t width) const {
    uint64_t v = 0;
    for (size_t i = width; i > 0; --i) v = (v << 8) | static_cast<unsigned char>(b_[at + i - 1]);
    return v;
  }
  unsigned char At(uint64_t at) const { return static_cast<unsigned char>(b_[at]); }

 private:
  const std::string& b_;
};

// The attribute's name as safe text for a message (hostile bytes: printable ASCII only, bounded).
std::string NameText(const Bytes& m, uint64_t at, uint64_t length) {
  std::string name;
  for (uint64_t i = 0; i < length && i < 64 && m.At(at + i) != 0; ++i) {
    const unsigned char c = m.At(at + i);
    name.push_back(c >= 0x20 && c < 0x7f && c != '\'' ? static_cast<char>(c) : '?');
  }
  return name;
}

struct FileSizes {
  size_t address = 8;  // bytes of an address in the file
  size_t length = 8;   // bytes of a length
};

// The bytes an element of the datatype encoded at [at, at + length) of `m` occupies in the
// attribute's value; 0 when this check does not read that datatype.
uint64_t ElementBytes(const Bytes& m, uint64_t at, uint64_t length, const FileSizes& sizes) {
  if (length < 8) return 0;
  const unsigned type_class = m.At(at) & 0x0F;
  const uint64_t size = m.Le(at + 4, 4);
  switch (type_class) {
    case 0:  // fixed-point: offset and precision follow
    case 4:  // bitfield: the same
      return length >= 12 ? size : 0;
    case 1:  // floating point: 12 bytes of properties
      return length >= 20 ? size : 0;
    case 3:  // fixed-length string
      return size;
    case 9: {  // variable length: strings only, of a one-byte integer base type
      const bool is_string = (m.At(at + 1) & 0x0F) == 1;
      const bool byte_base = length >= 20 && (m.At(at + 8) & 0x0F) == 0 && m.Le(at + 12, 4) == 1;
      const uint64_t stored = 4 + sizes.address + 4;  // length, global heap address and index
      return is_string && byte_base && size == stored ? size : 0;
    }
    default:  // time, opaque, compound, reference, enumeration, array: not read here
      return 0;
  }
}

// The number of points of the dataspace encoded at [at, at + length) of `m`; -1 when this check
// does not read it, -2 when the product overflows.
int64_t Points(const Bytes& m, uint64_t at, uint64_t length, const FileSizes& sizes) {
  if (length < 4) return -1;
  const unsigned version = m.At(at), rank = m.At(at + 1), flags = m.At(at + 2);
  if ((version != 1 && version != 2) || rank > 32 || (flags & ~1u) != 0) return -1;
  const uint64_t header = version == 1 ? 8 : 4;
  const uint64_t dims_bytes = uint64_t{rank} * sizes.length * ((flags & 1) != 0 ? 2 : 1);
  if (length < header + dims_bytes) return -1;
  if (version == 2) {
    const unsigned kind = m.At(at + 3);
    if (kind == 2) return rank == 0 ? 0 : -1;  // null
    if (kind == 0) return rank == 0 ? 1 : -1;  // scalar
    if (kind != 1) return -1;
  }
  uint64_t points = 1;
  for (unsigned i = 0; i < rank; ++i) {
    if (__builtin_mul_overflow(points, m.Le(at + header + uint64_t{i} * sizes.length, sizes.length),
                               &points) ||
        points > static_cast<uint64_t>(INT64_MAX)) {
      return -2;
    }
  }
  return static_cast<int64_t>(points);
}

// Checks the attribute message of `size` bytes at `at` of `m`.
AttributeCheck CheckAttribute(const Bytes& m, uint64_t at, uint64_t size, const FileSizes& sizes) {
  if (size < 8) return {AttributeVerdict::kDamaged, "an attribute message of under 8 bytes"};
  const unsigned version = m.At(at);
  if (version < 1 || version > 3) return Unchecked("an attribute message of an unknown version");
  if (version >= 2 && m.At(at + 1) != 0) return Unchecked("an attribute of a shared type or space");
  const uint64_t name_length = m.Le(at + 2, 2), type_length = m.Le(at + 4, 2),
                 space_length = m.Le(at + 6, 2);
  // Version 1 pads the name, the datatype and the dataspace to 8 bytes each.
  auto padded = [&](uint64_t n) { return version == 1 ? (n + 7) / 8 * 8 : n; };
  const uint64_t name_at = at + 8 + (version == 3 ? 1 : 0);
  const uint64_t type_at = name_at + padded(name_length);
  const uint64_t space_at = type_at + padded(type_length);
  const uint64_t value_at = space_at + padded(space_length);
  const uint64_t end = at + size;
  // libhdf5 copies the name up to its terminating zero: it must end inside the name's bytes.
  bool terminated = false;
  for (uint64_t i = 0; i < name_length && name_at + i < end && !terminated; ++i) {
    terminated = m.At(name_at + i) == 0;
  }
  const std::string name =
      NameText(m, name_at, std::min(name_length, end - std::min(end, name_at)));
  auto damaged = [&](const std::string& what) {
    return AttributeCheck{AttributeVerdict::kDamaged,
                          absl::StrCat("attribute '", name, "' of the root group ", what)};
  };
  if (!terminated) return damaged("has a name that does not end inside its message");
  if (type_at + type_length > end || space_at + space_length > end) {
    return damaged(
        absl::StrCat("describes its type and space in more than its message's ", size, " bytes"));
  }
  const uint64_t element = ElementBytes(m, type_at, type_length, sizes);
  if (element == 0) {
    return Unchecked(absl::StrCat("attribute '", name, "' of a type not read here"));
  }
  const int64_t points = Points(m, space_at, space_length, sizes);
  if (points == -1) {
    return Unchecked(absl::StrCat("attribute '", name, "' of a space not read here"));
  }
  uint64_t value = 0;
  if (points < 0 || __builtin_mul_overflow(element, static_cast<uint64_t>(points), &value)) {
    return damaged("claims a value whose size overflows 64 bits");
  }
  if (value > 0 && (value_at > end || value > end - value_at)) {
    return damaged(absl::StrCat("claims a value of ", value, " bytes (", points, " x ", element,
                                ") in a message of ", size, " bytes"));
  }
  return {AttributeVerdict::kChecked, ""};
}

// A run of header messages to read: [begin, end) of the file.
struct Block {
  uint64_t begin = 0, end = 0;
};

class HeaderReader {
 public:
  HeaderReader(hid_t file, uint64_t base, FileSizes sizes)
      : file_(file), base_(base), sizes_(sizes) {}

  AttributeCheck Check(uint64_t header) {
    std::string prefix;
    if (!Read(header, 16, &prefix)) return Unchecked("the object header cannot be read");
    const Bytes p(prefix);
    std::vector<Block> blocks;
    if (prefix.compare(0, 4, "OHDR") == 0) {
      if (p.At(4) != 2) return Unchecked("an object header of an unknown version");
      const unsigned flags = p.At(5);
      version_ = 2;
      creation_order_ = (flags & 0x04) != 0;
      const uint64_t width = uint64_t{1} << (flags & 0x03);
      const uint64_t size_at = 6 + ((flags & 0x20) != 0 ? 16 : 0) + ((flags & 0x10) != 0 ? 4 : 0);
      std::string field;
      if (!Read(header + size_at, width, &field)) return Unchecked("the object header is cut");
      const uint64_t begin = header + size_at + width;
      blocks.push_back({begin, begin + Bytes(field).Le(0, width)});
    } else {
      if (p.At(0) != 1) return Unchecked("an object header of an unknown version");
      version_ = 1;
      blocks.push_back({header + 16, header + 16 + p.Le(8, 4)});
    }
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (i >= kMaxChunks) return Unchecked("an object header of too many chunks");
      AttributeCheck block = CheckBlock(blocks[i], /*continuation=*/i > 0, &blocks);
      if (block.verdict != AttributeVerdict::kChecked) return block;
    }
    verdict_.attributes = checked_;
    return verdict_;
  }

  // The absolute address of the root group's local heap as the superblock (version 0 or 1) caches
  // it, 0 when it does not.
  uint64_t SuperblockRootHeap() {
    const uint64_t o = sizes_.address;
    std::string sb;
    if (!Read(base_, 32 + 8 * o + 16, &sb) || sb.compare(0, 8, "\x89HDF\r\n\x1a\n") != 0) return 0;
    const Bytes b(sb);
    const unsigned version = b.At(8);
    if (version > 1) return 0;
    // Versions, sizes, K values and flags, (v1: indexed-storage K), then 4 addresses.
    const uint64_t entry = 24 + (version == 1 ? 4 : 0) + 4 * o;
    const uint64_t cache_type = b.Le(entry + 2 * o, 4);
    if (cache_type != 1) return 0;
    const uint64_t heap = b.Le(entry + 2 * o + 8 + o, o);
    return heap <= UINT64_MAX - base_ ? base_ + heap : 0;
  }

  // The absolute address of the object's local heap (an old-format group's symbol table), 0 when
  // Check found none.
  uint64_t local_heap() const { return local_heap_; }

  // Checks the free list of the local heap at `heap`: "" when it stays inside the heap's data and
  // ends, else what is wrong. A heap or data segment that cannot be read is left to libhdf5.
  std::string CheckFreeList(uint64_t heap) {
    const uint64_t l = sizes_.length, o = sizes_.address;
    std::string prefix;
    if (!Read(heap, 8 + 2 * l + o, &prefix) || prefix.compare(0, 4, "HEAP") != 0) return "";
    const Bytes p(prefix);
    const uint64_t data_size = p.Le(8, l), head = p.Le(8 + l, l), data = p.Le(8 + 2 * l, o);
    std::string bytes;
    if (head != kHeapFreeNull && data_size > kMaxHeapBytes) {
      return absl::StrCat("the root group's name heap claims ", data_size, " bytes, over the ",
                          kMaxHeapBytes, " gantry reads");
    }
    if (head == kHeapFreeNull || data > UINT64_MAX - base_ ||
        !Read(base_ + data, data_size, &bytes, kMaxHeapBytes)) {
      return "";
    }
    const Bytes d(bytes);
    // Free blocks hold at least their two fields and do not overlap: no more fit than this.
    const uint64_t most = data_size / (2 * l);
    uint64_t offset = head;
    for (uint64_t blocks = 0; offset != kHeapFreeNull; ++blocks) {
      if (blocks >= most || !d.Has(offset, 2 * l)) {
        return absl::StrCat("the root group's name heap has a free list that ",
                            blocks >= most ? "loops" : "leaves its data");
      }
      offset = d.Le(offset, l);
    }
    return "";
  }

 private:
  bool Read(uint64_t at, uint64_t n, std::string* out, uint64_t most = kMaxChunkBytes) {
    if (n > most) return false;
    out->assign(static_cast<size_t>(n), '\0');
    return n == 0 || ReadCheckedFileBytes(file_, static_cast<haddr_t>(at), n, out->data());
  }

  // Keeps the first finding that is not kChecked (a damaged attribute over an unread one).
  void Note(AttributeCheck finding) {
    if (verdict_.verdict == AttributeVerdict::kChecked ||
        (finding.verdict == AttributeVerdict::kDamaged &&
         verdict_.verdict != AttributeVerdict::kDamaged)) {
      verdict_ = std::move(finding);
    }
  }

  AttributeCheck CheckBlock(const Block& block, bool continuation, std::vector<Block>* blocks) {
    if (block.end < block.begin) return Unchecked("an object header chunk of negative size");
    std::string bytes;
    if (!Read(block.begin, block.end - block.begin, &bytes)) {
      return Unchecked("an object header chunk that cannot be read");
    }
    const Bytes m(bytes);
    uint64_t at = 0;
    if (version_ == 2 && continuation) {
      // A continuation block of a version 2 header: "OCHK", messages, a 4-byte checksum.
      if (bytes.compare(0, 4, "OCHK") != 0 || bytes.size() < 8) {
        return Unchecked("a continuation block without its signature");
      }
      at = 4;
    }
    const uint64_t end = bytes.size() - (at == 4 ? 4 : 0);  // a continuation's checksum
    const uint64_t header = version_ == 1 ? 8 : (creation_order_ ? 6 : 4);
    while (m.Has(at, header) && at + header <= end) {
      const uint64_t type = version_ == 1 ? m.Le(at, 2) : m.Le(at, 1);
      const uint64_t size = version_ == 1 ? m.Le(at + 2, 2) : m.Le(at + 1, 2);
      const unsigned flags = version_ == 1 ? m.At(at + 4) : m.At(at + 3);
      const uint64_t data = at + header;
      if (size > end - data) return Unchecked("a header message running past its chunk");
      if (type == kContinuationMessage) {
        if (size < sizes_.address + sizes_.length) return Unchecked("a short continuation");
        const uint64_t address = m.Le(data, sizes_.address);
        const uint64_t length = m.Le(data + sizes_.address, sizes_.length);
        if (address > UINT64_MAX - base_ - length) return Unchecked("a continuation past the file");
        blocks->push_back({base_ + address, base_ + address + length});
      } else if (type == kAttributeInfoMessage) {
        const uint64_t heap_at = data + 2 + (size >= 2 && (m.At(data + 1) & 1) != 0 ? 2 : 0);
        const uint64_t undefined =
            sizes_.address == 8 ? UINT64_MAX : (uint64_t{1} << (8 * sizes_.address)) - 1;
        if (size < 2 || m.At(data) != 0 || heap_at + sizes_.address > data + size) {
          Note(Unchecked("an attribute info message not read here"));
        } else if (m.Le(heap_at, sizes_.address) != undefined) {
          Note(Unchecked("attributes in dense storage"));
        }
      } else if (type == kAttributeMessage) {
        if ((flags & 0x02) != 0) {
          Note(Unchecked("a shared attribute message"));
        } else {
          AttributeCheck attribute = CheckAttribute(m, data, size, sizes_);
          if (attribute.verdict == AttributeVerdict::kChecked)
            ++checked_;
          else
            Note(std::move(attribute));
        }
      } else if (type == kSymbolTableMessage && local_heap_ == 0 &&
                 m.Has(data, 2 * sizes_.address)) {
        // libhdf5 1.10.8 decodes the two addresses whatever size the message claims (0 included).
        const uint64_t heap = m.Le(data + sizes_.address, sizes_.address);
        if (heap <= UINT64_MAX - base_) local_heap_ = base_ + heap;
      }
      at = data + size;
    }
    return {AttributeVerdict::kChecked, ""};
  }

  hid_t file_;
  uint64_t base_;
  FileSizes sizes_;
  int version_ = 1;
  bool creation_order_ = false;
  int checked_ = 0;
  AttributeCheck verdict_{AttributeVerdict::kChecked, ""};
  uint64_t local_heap_ = 0;
};

// Reads `object`'s header into `reader` (created here); false when it cannot be located.
bool ReadHeader(hid_t object, Handle* file, std::optional<HeaderReader>* reader,
                AttributeCheck* result) {
  H5O_info_t info{};
  *file = Handle(H5Iget_file_id(object), H5Fclose);
  Handle fcpl(file->ok() ? H5Fget_create_plist(file->get()) : -1, H5Pclose);
  hsize_t user_block = 0;
  size_t address_bytes = 0, length_bytes = 0;
  if (!fcpl.ok() || H5Oget_info2(object, &info, H5O_INFO_BASIC) < 0 ||
      H5Pget_userblock(fcpl.get(), &user_block) < 0 ||
      H5Pget_sizes(fcpl.get(), &address_bytes, &length_bytes) < 0) {
    H5Eclear2(H5E_DEFAULT);
    *result = Unchecked("the object's header cannot be located");
    return false;
  }
  auto valid = [](size_t n) { return n == 2 || n == 4 || n == 8; };
  if (!valid(address_bytes) || !valid(length_bytes) || info.addr == HADDR_UNDEF ||
      info.addr > UINT64_MAX - user_block) {
    *result = Unchecked("the file's address sizes are not read here");
    return false;
  }
  // Addresses in the file count from its base, the superblock, which follows the user block.
  reader->emplace(file->get(), user_block, FileSizes{address_bytes, length_bytes});
  *result = (*reader)->Check(user_block + info.addr);
  return true;
}

}  // namespace

AttributeCheck CheckAttributeMessages(hid_t object) {
  Handle file;
  std::optional<HeaderReader> reader;
  AttributeCheck result;
  ReadHeader(object, &file, &reader, &result);
  return result;
}

RootGroupCheck CheckRootGroup(hid_t file) {
  Handle owner;
  std::optional<HeaderReader> reader;
  RootGroupCheck check;
  if (!ReadHeader(file, &owner, &reader, &check.attributes)) return check;
  if (reader->local_heap() != 0) check.heap = reader->CheckFreeList(reader->local_heap());
  // libhdf5 may take the root group's heap from the superblock instead: superblocks of version 0
  // and 1 cache it in the root group's symbol-table entry (cache type 1, its scratch pad).
  // In files libhdf5 writes both name the same heap: it is walked once.
  if (const uint64_t heap = reader->SuperblockRootHeap();
      check.heap.empty() && heap != 0 && heap != reader->local_heap()) {
    check.heap = reader->CheckFreeList(heap);
  }
  return check;
}

}  // namespace gantry::showers::h5

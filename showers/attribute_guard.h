// CheckAttributeMessages and CheckRootGroup: gantry's own read of an object header (its attribute
// messages; for the root group also its name heap's free list) before libhdf5 decodes them.
//
// Why: libhdf5 1.10.8 (Debian 12) decodes an attribute message (H5O_attr_decode) without checking
// that the attribute's value, its datatype's size times its dataspace's points, lies inside the
// message. H5Aexists, H5Aopen and H5Aiterate on an object whose header holds such a message copy
// past the end of the header's buffer (a heap overread, found by hdf5_inspect_fuzzer). So the
// header's bytes are read here first, through the checked file driver, and an H5A function is
// called only when every attribute message in the header is one this check reads and holds what
// it claims.
#ifndef GANTRY_SHOWERS_ATTRIBUTE_GUARD_H_
#define GANTRY_SHOWERS_ATTRIBUTE_GUARD_H_

#include <hdf5.h>

#include <string>

namespace gantry::showers::h5 {

enum class AttributeVerdict {
  // Every attribute message is compact and unshared, of an integer, float or string type (fixed
  // or variable length) over a scalar, simple or null dataspace, and holds its value.
  kChecked,
  // The header holds something this check does not read (dense attribute storage, shared or
  // compound types, an unknown version...) or could not be read: call no H5A function on it.
  kUnchecked,
  // An attribute message claims more bytes than it holds: the file is damaged.
  kDamaged,
};

struct AttributeCheck {
  AttributeVerdict verdict = AttributeVerdict::kUnchecked;
  std::string detail;  // what was found, for kDamaged a sentence naming the attribute
  int attributes = 0;  // attribute messages checked
};

// Checks the attribute messages of `object`'s header (a file id stands for its root group). The
// file must be open through the checked file driver (else kUnchecked). Call under LibraryLock.
AttributeCheck CheckAttributeMessages(hid_t object);

// What gantry checks of a file's root group, from one read of its header, before any link lookup
// or H5A call on it.
struct RootGroupCheck {
  AttributeCheck attributes;  // as CheckAttributeMessages
  // libhdf5 1.10.8 follows an old-format group's local-heap free list (H5HL__fl_deserialize) with
  // no bound: a list that loops makes every link lookup allocate without end (found by fuzzing:
  // 22 GB in two minutes). "" when the root group has no local heap, or its heap (the one its
  // header names and the one the superblock caches) has a free list that stays inside the heap's
  // data and ends; else a sentence saying what is wrong. A heap that cannot be read is left to
  // libhdf5 ("").
  std::string heap;
};

// Checks the root group of `file`. Call under LibraryLock.
RootGroupCheck CheckRootGroup(hid_t file);

}  // namespace gantry::showers::h5

#endif  // GANTRY_SHOWERS_ATTRIBUTE_GUARD_H_

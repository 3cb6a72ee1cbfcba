// A read-only HDF5 virtual file driver for files gantry did not write: every read is checked
// against the file's size before any byte moves, and HDF5's metadata accumulator is off.
//
// Why not sec2 or core: in libhdf5 1.10.8 (Debian 12) the metadata accumulator sits above the
// driver and does its own address arithmetic. A corrupt object address equal to HADDR_UNDEF
// "adjoins" the empty accumulator and HDF5 copies from a null buffer (a SEGV in
// H5F__accum_read, found by fuzzing a symbol-table message). This driver does not advertise
// H5FD_FEAT_ACCUMULATE_METADATA, so every metadata read reaches its read callback, which refuses
// undefined, wrapping and out-of-range addresses, and reads reaching more than 64 KiB past the end
// of the file (a corrupt superblock can ask for gigabytes of zeros there).
#ifndef GANTRY_SHOWERS_CHECKED_FILE_DRIVER_H_
#define GANTRY_SHOWERS_CHECKED_FILE_DRIVER_H_

#include <hdf5.h>

#include "absl/strings/string_view.h"

namespace gantry::showers::h5 {

// Makes fapl open files through the checked driver: the file named at H5Fopen, or, when image is
// not empty, those bytes (which must outlive the open file; the name is then ignored). Returns a
// negative value when HDF5 refuses the driver. Call under LibraryLock.
herr_t UseCheckedFileDriver(hid_t fapl, absl::string_view image = {});

// Reads `size` bytes at absolute `address` of `file`, opened through the checked driver, with the
// checks of HDF5's own reads (false when they refuse, or when `file` uses another driver). For
// gantry's own checks of metadata that libhdf5 would decode unchecked. Call under LibraryLock.
bool ReadCheckedFileBytes(hid_t file, haddr_t address, size_t size, void* out);

}  // namespace gantry::showers::h5

#endif  // GANTRY_SHOWERS_CHECKED_FILE_DRIVER_H_

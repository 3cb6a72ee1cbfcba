// Binning: the histogram edges and fills behind every separation power, shared by the per-bin
// validation and the field-standard metrics so that both bin a feature the same way.
#ifndef GANTRY_WORKERS_PHYSICS_BINNING_H_
#define GANTRY_WORKERS_PHYSICS_BINNING_H_

#include <vector>

namespace gantry::physics {

// `bins` equal-width bins over the reference values (not empty), padded by 5% of their range on
// both sides (by 5% of |value|, at least 1e-9, when all values are equal).
std::vector<double> FeatureEdges(const std::vector<double>& reference, int bins);

// The histogram of `values` on `edges`, normalised to unit sum (all 0 for no values). Values
// outside the edges fall into the end bins, so a sample far off still separates; NaN counts in
// the first bin.
std::vector<double> NormalisedHistogram(const std::vector<double>& values,
                                        const std::vector<double>& edges);

}  // namespace gantry::physics

#endif  // GANTRY_WORKERS_PHYSICS_BINNING_H_

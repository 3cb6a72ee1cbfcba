// A UnitCube maps a search space's assignments to points of [0, 1]^d and back, the coordinates
// the Gaussian process and the evolutionary search work in: continuous axes linearly, log axes in
// log(value), an integer axis as n equal cells (one per integer), a categorical parameter as a
// one-hot block (decoded by its largest coordinate). Uniform points of the cube decode to uniform
// (log-uniform for log axes) assignments.
#ifndef GANTRY_STUDIES_UNIT_CUBE_H_
#define GANTRY_STUDIES_UNIT_CUBE_H_

#include <vector>

#include "Eigen/Core"
#include "studies/random_source.h"
#include "studies/search_space.h"
#include "studies/study_types.h"

namespace gantry::studies {

class UnitCube {
 public:
  // `space` must validate and outlive the UnitCube.
  explicit UnitCube(const SearchSpace& space);

  // Coordinates of the cube (one per numeric parameter, one per choice of a categorical one).
  int dimensions() const { return dimensions_; }

  // The point of a valid assignment (CheckAssignment OK).
  Eigen::VectorXd Encode(const Assignment& assignment) const;
  // The assignment nearest to a point (coordinates clipped into [0, 1]); always valid.
  Assignment Decode(const Eigen::VectorXd& point) const;
  // Encode(Decode(point)): the point moved to where its assignment sits (integers on their cell's
  // centre, categoricals exactly one-hot).
  Eigen::VectorXd Project(const Eigen::VectorXd& point) const { return Encode(Decode(point)); }
  // A uniform point of the cube.
  Eigen::VectorXd Sample(RandomSource& random) const;

  // Where parameter i's coordinates start; a categorical one spans choices.size() of them.
  int offset(int parameter) const { return offsets_[parameter]; }

 private:
  const SearchSpace& space_;
  std::vector<int> offsets_;
  int dimensions_ = 0;
};

}  // namespace gantry::studies

#endif  // GANTRY_STUDIES_UNIT_CUBE_H_

# gantry-validate --summary on two toy files (nominal and depth x1.3): the table names both samples
# and the figures, and the JSON shows the stretched sample's shower maximum ~30% deeper, and its
# metrics: the depth errors and the longitudinal profile far above their floors, all within [0, 1].
include(${CMAKE_CURRENT_LIST_DIR}/toy_files.cmake)
make_toy_files(summary_ ref seed=1 deep seed=2,dscale=1.3)
execute_process(COMMAND ${VALIDATE} --summary ${DIR}/summary_ref.h5 ${DIR}/summary_deep.h5
                        --json=${DIR}/summary.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gantry-validate --summary: ${out}${err}")
endif()
message(STATUS "${out}")
foreach(text "Monte Carlo (reference)" "generated" "sampling fraction" "shower max [layer]"
             "sf_relative_error_max" "shower_max_relative_error" "centroid_depth_relative_error"
             "eprof_longitudinal" "eprof_transverse")
  string(FIND "${out}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "'${text}' missing from:\n${out}")
  endif()
endforeach()
execute_process(COMMAND ${PYTHON} -c "
import json, sys
s = json.load(open(sys.argv[1]))
r, g = s['reference'], s['generated']
assert r['events'] == g['events'] == 300, s
ratio = g['shower_max_layer']['mean'] / r['shower_max_layer']['mean']
assert 1.2 < ratio < 1.4, ratio
assert 0.005 < r['sampling_fraction']['mean'] < 0.05, r
m = s['metrics']
for k in ('shower_max_relative_error', 'centroid_depth_relative_error', 'eprof_longitudinal'):
  assert 5 * m[k + '_null'] < m[k] <= 1, (k, m)
assert m['eprof_longitudinal'] > m['eprof_transverse'], m
print('ok', round(ratio, 3))
" ${DIR}/summary.json RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "summary check failed: ${out}${err}")
endif()
message(STATUS "${out}")
# Usage errors exit 2.
execute_process(COMMAND ${VALIDATE} --summary ${DIR}/summary_ref.h5 RESULT_VARIABLE rc
                OUTPUT_QUIET ERROR_QUIET)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "--summary with one file exited ${rc}, expected 2")
endif()

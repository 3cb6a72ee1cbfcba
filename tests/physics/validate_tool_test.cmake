# gantry-toymc writes a reference, an independent sample and one with a 10% energy scale; gantry-validate
# must report sf_mre near its floor for the first and 0.1 / 1.1 (bounded relative error) for the second
# (see validation_test.cc for why), and its JSON report must parse, with the standard errors and the
# sampling fraction against energy.
include(${CMAKE_CURRENT_LIST_DIR}/toy_files.cmake)
make_toy_files(EleEscan_ ref seed=1 same seed=2 scaled seed=2,escale=1.1)
foreach(name same scaled)
  execute_process(COMMAND ${VALIDATE} ${DIR}/EleEscan_ref.h5 ${DIR}/EleEscan_${name}.h5
                          --edges=50,100,150 --json=${DIR}/report_${name}.json
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gantry-validate ${name}: ${out}${err}")
  endif()
  message(STATUS "${name}:\n${out}")
endforeach()
execute_process(COMMAND ${PYTHON} -c "
import json, sys
same = json.load(open(sys.argv[1])); scaled = json.load(open(sys.argv[2]))
m, s = same['metrics'], scaled['metrics']
assert m['bins_used'] == 2 and len(same['bins']) == 2
assert m['sf_mre'] < 2.5 * m['sf_mre_null'], m
assert abs(s['sf_mre'] - 0.1 / 1.1) < 3 * s['sf_mre_null'] + 0.002, s
for k in ('sf_relative_error_max', 'shower_max_relative_error', 'centroid_depth_relative_error',
          'eprof_longitudinal', 'eprof_transverse'):
  assert 0 <= m[k] < 2.5 * m[k + '_null'], (k, m)
assert abs(s['sf_relative_error_max'] - 0.1 / 1.1) < 4 * s['sf_relative_error_max_null'], s
hist = {h['name']: h for h in same['histograms']}
assert {'profile_x', 'profile_y', 'profile_z', 'cell_energy', 'feature/hits'} <= set(hist), hist.keys()
for name in ('profile_z', 'feature/total_energy', 'feature/hits', 'sampling_fraction'):
  h = hist[name]
  assert len(h['reference_error']) == len(h['reference']) == len(h['edges']) - 1, name
  assert all(e >= 0 for e in h['reference_error'] + h['generated_error']), name
v = hist['sampling_fraction_vs_energy']
assert v['edges'] == [] and v['x_label'] == 'E_primary [GeV]', v
assert v['x'] == [75.0, 125.0], v['x']
assert all(0 < e < 0.02 * r for e, r in zip(v['reference_error'], v['reference'])), v
print('ok', round(m['sf_mre'], 4), round(s['sf_mre'], 4))
" ${DIR}/report_same.json ${DIR}/report_scaled.json RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "report check failed: ${out}${err}")
endif()
message(STATUS "${out}")

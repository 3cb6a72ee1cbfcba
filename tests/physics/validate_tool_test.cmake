# gantry-toymc writes a reference, an independent sample and one with a 10% energy scale; gantry-validate
# must report sf_mre near its floor for the first and ~0.1 for the second (see validation_test.cc for
# why), and its JSON report must parse.
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
assert abs(s['sf_mre'] - 0.1) < 3 * s['sf_mre_null'] + 0.002, s
names = {h['name'] for h in same['histograms']}
assert {'profile_x', 'profile_y', 'profile_z', 'cell_energy', 'feature/hits'} <= names, names
print('ok', round(m['sf_mre'], 4), round(s['sf_mre'], 4))
" ${DIR}/report_same.json ${DIR}/report_scaled.json RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "report check failed: ${out}${err}")
endif()
message(STATUS "${out}")

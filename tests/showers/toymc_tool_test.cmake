# Runs gantry-toymc and checks the file with h5py the way the 3DGAN reference scripts read it.
execute_process(COMMAND ${TOOL} toymc:layout=25,events=50,seed=3,emin=10,emax=500 ${OUT} --hcal
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gantry-toymc failed (${rc}): ${out}${err}")
endif()
execute_process(COMMAND ${PYTHON} -c "
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], 'r')
X = np.array(f.get('ECAL')); Y = np.array(f.get('target')[:, 1])
assert X.shape == (50, 25, 25, 25), X.shape
assert f['HCAL'].shape == (50, 5, 5, 60)
assert np.all(X >= 0) and np.all((Y >= 10) & (Y <= 500)), Y
sf = X.sum(axis=(1, 2, 3)) / Y
assert 0.015 < sf.mean() < 0.025, sf.mean()  # the ~2% visible fraction
print('ok', X.shape, round(float(sf.mean()), 4))
" ${OUT} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "h5py check failed: ${out}${err}")
endif()
message(STATUS "${out}")

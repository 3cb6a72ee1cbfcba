# toy_files.cmake: included by the gantry-validate script tests. make_toy_files(PREFIX NAME EXTRA
# [NAME EXTRA ...]) writes ${DIR}/${PREFIX}${NAME}.h5 with gantry-toymc (${TOYMC}) from
# toymc:layout=25,events=300,emin=50,emax=150,${EXTRA}; a failure stops the test.
function(make_toy_files prefix)
  set(pairs ${ARGN})
  list(LENGTH pairs n)
  math(EXPR last "${n} - 1")
  foreach(i RANGE 0 ${last} 2)
    math(EXPR j "${i} + 1")
    list(GET pairs ${i} name)
    list(GET pairs ${j} extra)
    execute_process(COMMAND ${TOYMC} toymc:layout=25,events=300,emin=50,emax=150,${extra}
                            ${DIR}/${prefix}${name}.h5 RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "gantry-toymc ${name}: ${err}")
    endif()
  endforeach()
endfunction()

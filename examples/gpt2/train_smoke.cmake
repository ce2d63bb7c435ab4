# ctest e2e.gpt2_train_smoke: trains the tiny GPT-2 for a few steps and
# checks that the last loss of loss.csv is below the first.
#   cmake -DGPT2=<gpt2-example> -DOUT=<dir> [-DSTEPS=30] [-DEXTRA=--pack]
#         -P train_smoke.cmake
# EXTRA: one more flag for gpt2-example (e2e.gpt2_pack_smoke: --pack).
if(NOT GPT2 OR NOT OUT)
  message(FATAL_ERROR "usage: cmake -DGPT2=... -DOUT=... -P train_smoke.cmake")
endif()
if(NOT STEPS)
  set(STEPS 30)
endif()
file(REMOVE_RECURSE ${OUT})
execute_process(COMMAND ${GPT2} --steps ${STEPS} --warmup 5 --print-every 10
                        --out ${OUT} ${EXTRA}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "FAIL: gpt2-example exited with ${rc}")
endif()
file(STRINGS ${OUT}/loss.csv rows)
list(LENGTH rows n)
math(EXPR last "${n} - 1")
if(NOT last EQUAL STEPS)
  message(FATAL_ERROR "FAIL: loss.csv has ${last} rows, expected ${STEPS}")
endif()
list(GET rows 1 first_row)
list(GET rows ${last} last_row)
string(REPLACE "," ";" first_row "${first_row}")
string(REPLACE "," ";" last_row "${last_row}")
list(GET first_row 2 first)
list(GET last_row 2 final)
# if(LESS) compares the strings as floating-point numbers.
if(NOT final LESS first)
  message(FATAL_ERROR "FAIL: loss went from ${first} to ${final}")
endif()
message(STATUS "PASS: loss ${first} -> ${final} in ${STEPS} steps")

# ctest example.tiny_encoder_demo: the `make demo` fixture and its known answer.
#   cmake -DENCODER=... -DDRIFTSCOPE=... -DOUT=DIR -P check_demo.cmake
# Fails (FATAL_ERROR, non-zero exit) unless:
#   - driftscope compare fp32 fp16 exits 3 (silent failure) or 1 (diverged), and its JSON report
#     names encoder.layers.2.norm1 as the first divergence and as the first non-finite tensor;
#   - every tensor before it passed;
#   - driftscope compare fp32 fp16-safe (LayerNorm statistics in float32) exits 0 with "pass".
cmake_minimum_required(VERSION 3.22)
foreach(var ENCODER DRIFTSCOPE OUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_demo.cmake: -D${var}=... is required")
  endif()
endforeach()
set(expected "encoder.layers.2.norm1")

file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")
execute_process(COMMAND "${ENCODER}" "${OUT}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tiny_encoder ${OUT} exited ${rc}")
endif()
execute_process(COMMAND "${ENCODER}" --precision fp16-safe "${OUT}/fp16-safe.tdump" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tiny_encoder --precision fp16-safe exited ${rc}")
endif()

# The float16 run: localised at the LayerNorm that overflows.
execute_process(COMMAND "${DRIFTSCOPE}" compare "${OUT}/fp32.tdump" "${OUT}/fp16.tdump"
                        --json "${OUT}/fp16-report.json" --no-progress --quiet
                RESULT_VARIABLE rc OUTPUT_VARIABLE summary ERROR_VARIABLE err)
if(NOT (rc EQUAL 3 OR rc EQUAL 1))
  message(FATAL_ERROR "compare fp32 fp16 exited ${rc}, expected 3 or 1\n${summary}${err}")
endif()
file(READ "${OUT}/fp16-report.json" report)
string(JSON verdict GET "${report}" verdict)
string(JSON first GET "${report}" first_divergence name)
string(JSON nonfinite GET "${report}" first_nonfinite name)
if(NOT first STREQUAL expected)
  message(FATAL_ERROR "first divergence is '${first}', expected '${expected}'\n${summary}")
endif()
if(NOT nonfinite STREQUAL expected)
  message(FATAL_ERROR "first non-finite tensor is '${nonfinite}', expected '${expected}'")
endif()
if(NOT (verdict STREQUAL "silent_failure" OR verdict STREQUAL "diverged"))
  message(FATAL_ERROR "verdict is '${verdict}'")
endif()
string(JSON count LENGTH "${report}" tensors)
math(EXPR last "${count} - 1")
set(seen_expected OFF)
foreach(i RANGE ${last})
  string(JSON name GET "${report}" tensors ${i} name)
  string(JSON status GET "${report}" tensors ${i} status)
  if(name STREQUAL expected)
    set(seen_expected ON)
    break()
  endif()
  if(NOT status STREQUAL "pass")
    message(FATAL_ERROR "'${name}' before ${expected} has status '${status}', expected pass")
  endif()
endforeach()
if(NOT seen_expected)
  message(FATAL_ERROR "${expected} is not among the report's tensors")
endif()

# The fix: the same float16 engine with float32 LayerNorm statistics passes.
execute_process(COMMAND "${DRIFTSCOPE}" compare "${OUT}/fp32.tdump" "${OUT}/fp16-safe.tdump"
                        --json "${OUT}/fp16-safe-report.json" --no-progress --quiet
                RESULT_VARIABLE rc OUTPUT_VARIABLE summary ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "compare fp32 fp16-safe exited ${rc}, expected 0\n${summary}${err}")
endif()
file(READ "${OUT}/fp16-safe-report.json" report)
string(JSON verdict GET "${report}" verdict)
if(NOT verdict STREQUAL "pass")
  message(FATAL_ERROR "fp16-safe verdict is '${verdict}', expected pass")
endif()
message(STATUS "demo localised at ${expected} (${verdict} for the fixed run)")

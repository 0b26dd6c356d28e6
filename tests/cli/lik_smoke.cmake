# lik_smoke.cmake — run by ctest (tests/cli/CMakeLists.txt):
#   cmake -DLIK=path/to/lik [-DEMULATOR="qemu-aarch64|-L|/usr/aarch64-linux-gnu"] -P lik_smoke.cmake
# Runs one exact job of the `lik` command on the bundled Cranfield data
# (`lik --json -n 2 -k 5 -t 2`: the first 2 queries, top 5 of 1400 documents)
# and checks that the report is valid JSON, the scores finite and descending,
# and the top 5 documents and their scores (to 1e-3) those of the x86 build
# (AVX2 / AVX-512 and portable paths agree; so must NEON and SVE).
cmake_minimum_required(VERSION 3.21)

string(REPLACE "|" ";" emulator "${EMULATOR}")
execute_process(COMMAND ${emulator} ${LIK} --json -n 2 -k 5 -t 2
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "lik exited with ${rc}:\n${err}")
endif()

string(JSON isa ERROR_VARIABLE jerr GET "${out}" cpu_isa)
if(jerr)
  message(FATAL_ERROR "lik --json: not a JSON report (${jerr}):\n${out}")
endif()
string(JSON nq GET "${out}" num_queries)
string(JSON nd GET "${out}" num_docs)
string(JSON nres LENGTH "${out}" results)
if(NOT nq EQUAL 2 OR NOT nd EQUAL 1400 OR NOT nres EQUAL 2)
  message(FATAL_ERROR "lik --json: ${nq} queries, ${nd} docs, ${nres} results (want 2, 1400, 2)")
endif()

# The x86 build's top 5 of queries 1 and 2 (doc ids; scores truncated to 1e-3).
set(want_ids_0 486 184 12 1263 14)
set(want_scores_0 13.258 12.120 11.437 11.226 11.153)
set(want_ids_1 12 746 14 141 172)
set(want_scores_1 13.687 12.182 11.873 11.267 11.187)
foreach(q RANGE 1)
  string(JSON qid GET "${out}" results ${q} query_id)
  math(EXPR want_qid "${q} + 1")
  if(NOT qid EQUAL want_qid)
    message(FATAL_ERROR "result ${q}: query_id ${qid}, want ${want_qid}")
  endif()
  foreach(r RANGE 4)
    string(JSON id GET "${out}" results ${q} doc_ids ${r})
    string(JSON score GET "${out}" results ${q} scores ${r})
    list(GET want_ids_${q} ${r} want_id)
    list(GET want_scores_${q} ${r} want_score)
    # cJSON writes a non-finite number as null; a finite one as digits.
    if(NOT score MATCHES "^-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?$")
      message(FATAL_ERROR "query ${qid} rank ${r}: score '${score}' is not a finite number")
    endif()
    # to 1e-3: the score's integer part and first three decimals, each side of
    # the x86 value (a last-digit rounding difference)
    string(REGEX REPLACE "^(-?[0-9]+)\\.([0-9][0-9][0-9]).*$" "\\1\\2" milli "${score}")
    string(REPLACE "." "" want_milli "${want_score}")
    math(EXPR diff "${milli} - ${want_milli}")
    if(NOT id EQUAL want_id OR diff GREATER 1 OR diff LESS -1)
      message(FATAL_ERROR "query ${qid} rank ${r}: doc ${id} score ${score}, "
                          "want doc ${want_id} score ${want_score}... (the x86 result)")
    endif()
  endforeach()
endforeach()
message(STATUS "lik --json on ${isa}: 2 queries, top 5 as on x86")

# The include rules between the network-side layers (docs/architecture.md): protocol is below
# both network and node, and those two never include each other. Run by ctest as
# `cmake -DSRC=<repo>/src -P layers_test.cmake`; fails listing every offending line.
set(rules
  "node:network/"
  "node:cli/"
  "network:node/"
  "network:cli/"
  "protocol:network/"
  "protocol:node/"
  "protocol:serve/"
  "protocol:cli/")
set(bad "")
foreach(rule IN LISTS rules)
  string(REPLACE ":" ";" parts "${rule}")
  list(GET parts 0 layer)
  list(GET parts 1 banned)
  file(GLOB_RECURSE files "${SRC}/${layer}/*.h" "${SRC}/${layer}/*.cpp")
  if(NOT files)
    message(FATAL_ERROR "no sources under ${SRC}/${layer}: wrong SRC?")
  endif()
  foreach(f IN LISTS files)
    file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"${banned}")
    foreach(l IN LISTS lines)
      file(RELATIVE_PATH rel "${SRC}" "${f}")
      string(APPEND bad "  ${rel}: ${l}  (${layer} must not include ${banned})\n")
    endforeach()
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "layer rule broken:\n${bad}")
endif()
message(STATUS "layer includes ok: node and network share only protocol")

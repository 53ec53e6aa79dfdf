# Includes point down the layers (docs/architecture.md, "Layers"): a file may include its own
# layer's files and those of the layers below it, never one above it or beside it. Run as
# `cmake -DROOT=<source dir> -P cmake/check_layers.cmake`; the build runs it before compiling
# (src/CMakeLists.txt), so a wrong include fails the build with the file, line and why.
#
# The layers, lowest first (a layer's rank is its number; two layers of one rank are peers and
# may not include each other). The folder of a file under src/ or include/floodgate/ is its
# layer; a header directly in include/floodgate/ (ascii.hpp, version.hpp) is `base`. One header
# is placed by what it is rather than where it sits: store/item.hpp (the plain values a limit
# decides over, no Asio) is `limit`.
set(RANK_base 0)
set(RANK_uri 1)
set(RANK_metrics 2)
set(RANK_calendar 3)
set(RANK_tls 4)
set(RANK_config 5)
set(RANK_keys 6)
set(RANK_limit 7)
set(RANK_store 8)
set(RANK_decide 9)
set(RANK_net 10)       # sockets, deadlines, upstream pools, balancer, health
set(RANK_exchange 11)  # the exchange, the pipeline, THE driver (driver.hpp)
set(RANK_h1 12)        # HTTP/1.1 framing (fronts and upstream calls)
set(RANK_h2 12)        # HTTP/2 framing: a peer of h1, neither includes the other
set(RANK_h3 12)        # HTTP/3 over QUIC: a third peer of h1 and h2
set(RANK_rls 12)       # Envoy's rate limit service over a Front: no framing of its own
set(RANK_server 13)    # workers, acceptors, sessions (the protocol pick), the Proxy
set(RANK_admin 14)
set(RANK_replay 14)
set(RANK_app 15)

# Libraries a layer may not include at all, whatever its rank: the decision is protocol-free
# (an RLS call reaches it with no HTTP), the exchange and its driver speak no protocol's types
# (their Fields are filled by each front), nghttp2 stays in h2/, and ngtcp2 and nghttp3 in h3/
# (GnuTLS in h3/ and tls/).
set(FORBIDDEN_decide "boost/beast|nghttp2|ngtcp2|nghttp3|gnutls|boost/asio/ip")
set(FORBIDDEN_exchange "nghttp2|ngtcp2|nghttp3|gnutls|boost/beast")
set(FORBIDDEN_h1 "nghttp2|ngtcp2|nghttp3|gnutls")
set(FORBIDDEN_h2 "ngtcp2|nghttp3|gnutls")
set(FORBIDDEN_h3 "nghttp2|boost/beast")
set(FORBIDDEN_rls "nghttp2|ngtcp2|nghttp3|gnutls|boost/beast")

# The layer of a path relative to the source root ("" when it is in none).
function(layer_of path out)
  set(layer "")
  if(path MATCHES "^include/floodgate/store/item\\.hpp$")
    set(layer limit)
  elseif(path MATCHES "^include/floodgate/([^/]+)/")
    set(layer ${CMAKE_MATCH_1})
  elseif(path MATCHES "^include/floodgate/[^/]+$")
    set(layer base)
  elseif(path MATCHES "^src/([^/]+)/")
    set(layer ${CMAKE_MATCH_1})
  endif()
  if(NOT DEFINED RANK_${layer})
    set(layer "")
  endif()
  set(${out} "${layer}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE files RELATIVE ${ROOT}
  ${ROOT}/src/*.cpp ${ROOT}/src/*.hpp ${ROOT}/include/floodgate/*.hpp)
set(errors "")
foreach(file IN LISTS files)
  layer_of(${file} from)
  if(from STREQUAL "")
    continue()
  endif()
  get_filename_component(dir ${file} DIRECTORY)
  if(DEFINED FORBIDDEN_${from})
    file(STRINGS ${ROOT}/${file} system REGEX "^#include <(${FORBIDDEN_${from}})")
    foreach(line IN LISTS system)
      string(APPEND errors "${file}: ${line}: ${from} may not use ${FORBIDDEN_${from}}\n")
    endforeach()
  endif()
  file(STRINGS ${ROOT}/${file} lines REGEX "^#include \"")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" included "${line}")
    # What it names, relative to the source root: floodgate/... is a public header; a path
    # whose first folder is a layer is src-relative; anything else is beside the file.
    # (${CMAKE_MATCH_1} is expanded before the if() that matches runs: two steps.)
    string(REGEX MATCH "^[^/]+/" first "${included}")
    string(REPLACE "/" "" first "${first}")
    if(included MATCHES "^floodgate/")
      set(target "include/${included}")
    elseif(NOT first STREQUAL "" AND DEFINED RANK_${first})
      set(target "src/${included}")
    else()
      set(target "${dir}/${included}")
    endif()
    layer_of(${target} to)
    if(to STREQUAL "" OR to STREQUAL from)
      continue()
    endif()
    if(NOT RANK_${to} LESS RANK_${from})
      string(APPEND errors "${file}: includes \"${included}\": ${from} may include only the "
                           "layers below it, and ${to} is not one\n")
    endif()
  endforeach()
endforeach()
if(errors)
  message(FATAL_ERROR "An include points up the layers (docs/architecture.md):\n${errors}")
endif()

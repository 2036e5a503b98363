#!/bin/sh
# Starts the node (`npm start`): with jemalloc when the machine has it, else glibc's malloc.
# glibc keeps a 64 MB arena per thread and gives little back, and RocksDB's, isolated-vm's and
# libuv's threads all allocate; at the scale bench's size jemalloc, returning freed pages after
# a second, held 20-45% less RSS at the same speed (README: Memory). ALLOCATOR=glibc opts
# out; Debian/Ubuntu: `apt-get install libjemalloc2`.
if [ "${ALLOCATOR:-}" != "glibc" ]; then
  for lib in /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/lib/aarch64-linux-gnu/libjemalloc.so.2 \
             /usr/lib64/libjemalloc.so.2 /usr/lib/libjemalloc.so.2 /usr/local/lib/libjemalloc.so.2; do
    if [ -f "$lib" ]; then
      export LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}"
      export MALLOC_CONF="${MALLOC_CONF:-background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0}"
      break
    fi
  done
fi
# For the benchmarks: START_SCRIPT runs another script under the same allocator (their bare fastify
# ceiling), START_NODE_FLAGS adds node flags (--cpu-prof, --trace-gc).
# shellcheck disable=SC2086
exec node ${START_NODE_FLAGS:-} "${START_SCRIPT:-$(dirname "$0")/../dist/src/main.js}" "$@"

#!/usr/bin/env bash
# PeerSim 1.0.5 as an external yardstick for dtsim's gossip engines (no PeerSim code is
# part of dtsim; this script only builds and times the upstream distribution).
#
#   bash benchmarks/peersim.sh SRC [REPEATS]
#
# SRC is a PeerSim 1.0.5 source tree (with src/, example/, jep-2.3.0.jar, djep-1.0.0.jar),
# or a git repository holding it at commit 40bb5b0 (the first commit of the public
# repository TarasLykhenko/peersim-1.0.5). Builds the simulator core and the two
# averaging examples with javac, then times, best of REPEATS (default 3):
#   cycle-driven averaging (example.aggregation.AverageFunction, config-example1.txt) on
#     the complete graph (OracleIdleProtocol), n = 1e5 and 1e6;
#   event-driven averaging (example.edaggregation.AverageED, config-edexample.txt) on the
#     complete graph, n = 1e4, without delay and with a delay of 10% of a cycle.
# Each rate is exchanges per second from the difference of two runs that differ only in
# the number of cycles, so JVM start-up, configuration and initialisation cancel out.
# One JSON line per case on stdout.
set -euo pipefail
src=${1:?usage: bash benchmarks/peersim.sh SRC [REPEATS]}
repeats=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ ! -d "$src/src/peersim" ] && git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  # one subtree and blob at a time: a mirror may lack unrelated large files (git archive
  # with path arguments still reads the whole tree), and a bare mirror works too
  for d in src example; do
    git -C "$src" archive --prefix="$d/" "40bb5b0:$d" | tar -x -C "$work"
  done
  for f in jep-2.3.0.jar djep-1.0.0.jar; do
    git -C "$src" cat-file blob "40bb5b0:$f" >"$work/$f"
  done
else
  cp -r "$src/src" "$src/example" "$src"/jep-2.3.0.jar "$src"/djep-1.0.0.jar "$work"/
fi
cd "$work"
mkdir classes
javac -nowarn -encoding ISO-8859-1 -cp "jep-2.3.0.jar:djep-1.0.0.jar" -d classes \
  $(find src/peersim src/example/aggregation src/example/edaggregation -name '*.java')
cp="classes:jep-2.3.0.jar:djep-1.0.0.jar"
ms() {  # the simulation's own run time in ms (PeerSim's __t switch), best of $repeats
  local best=""
  for _ in $(seq "$repeats"); do
    t=$(java -cp "$cp" peersim.Simulator "$@" __t=1 2>/dev/null | tail -1)
    if [ -z "$best" ] || [ "$t" -lt "$best" ]; then best=$t; fi
  done
  echo "$best"
}
rate() {  # name nodes c1 c2 config args...: exchanges/s between c1 and c2 cycles
  local name=$1 n=$2 c1=$3 c2=$4 key=$5; shift 5
  local t1 t2
  t1=$(ms "$@" "$key=$c1")
  t2=$(ms "$@" "$key=$c2")
  python3 - "$name" "$n" "$c1" "$c2" "$t1" "$t2" <<'PY'
import json, sys
name, n, c1, c2, t1, t2 = sys.argv[1], *map(int, sys.argv[2:])
ex = n * (c2 - c1)
dt = (t2 - t1) / 1000
print(json.dumps({"case": name, "nodes": n, "exchanges": ex, "seconds": dt,
                  "exchanges_per_s": ex / dt if dt > 0 else None}))
PY
}
cd_args=(example/config-example1.txt protocol.lnk=OracleIdleProtocol include.init=lin)
rate cycle_complete 100000 5 25 simulation.cycles "${cd_args[@]}" network.size=100000
rate cycle_complete 1000000 2 8 simulation.cycles "${cd_args[@]}" network.size=1000000
ed_args=(example/config-edexample.txt protocol.link=OracleIdleProtocol "include.init=vals sch" SIZE=10000)
rate event_nodelay 10000 10 60 CYCLES "${ed_args[@]}"
rate event_delay10 10000 10 60 CYCLES "${ed_args[@]}" MINDELAY=10 MAXDELAY=10

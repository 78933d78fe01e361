#!/usr/bin/env bash
# Record dtsim's key outputs at fixed seeds into DIR, for a bit-for-bit comparison
# before and after a refactor (tools/compare_snapshots.py DIR_A DIR_B).
#   bash tools/snapshot.sh DIR [quick|full]
# quick: reproduce --quick, every experiment --quick, the CLI JSON set.
# full:  the same plus the full reproduce and every experiment's full run.
set -uo pipefail
out=$(realpath -m "$1"); mode=${2:-quick}
mkdir -p "$out/cli" "$out/runs"
cd "$(dirname "$0")/.."
run() {  # name, then the command: stdout, stderr and exit status to $out/cli/name.*
  local name=$1; shift
  "$@" >"$out/cli/$name.out" 2>"$out/cli/$name.err"; echo $? >"$out/cli/$name.rc"
}
run pipeline_des   dtsim pipeline --stages 12 --replicas 2 --skip-budget 1 --availability 0.8 --domain-outage 0.01 --microbatches 2000 --replications 4 --engine des --seed 3 --json
run pipeline_auto  dtsim pipeline --stages 48 --replicas 3 --skip-budget 1 --domain-outage 1e-3 --seed 1 --json
run pipeline_imp   dtsim pipeline --method importance --stages 48 --replicas 3 --skip-budget 4 --seed 2 --json
run pipeline_topo  dtsim pipeline --stages 8 --topology datacenter:regions=3,racks=4,hosts=8 --placement spread --replications 4 --microbatches 2000 --seed 4 --json
run pipeline_pack  dtsim pipeline --stages 8 --topology datacenter:regions=3,racks=4,hosts=8 --placement packed --replications 4 --microbatches 2000 --seed 4 --json
run design_a       dtsim design --stages 48 --availability 0.9 --skip-budget 4 --target-drop 1e-3 --json
run design_b       dtsim design --skip-penalty 0.1 --json
run gossip_c       dtsim gossip --topology complete --nodes 100 --rounds 40 --noise 1 --seed 5 --json
run gossip_n10     dtsim gossip --nodes 10 --seed 1012 --json
run gossip_stub    dtsim gossip --nodes 10 --protocol edge --adversary stubborn --adversary-value 10 --clip 0.5 --seed 6 --json
run gossip_torus   dtsim gossip --topology torus:dims=8x8 --protocol edge --rounds 2000 --seed 7 --json
run gossip_async   dtsim gossip --nodes 50 --protocol async --rounds 5 --seed 8 --json
run gossip_ring_as dtsim gossip --topology ring:n=16 --protocol async --rounds 20 --adversary stubborn --adversary-value 3 --seed 9 --json
run gossip_alie    dtsim gossip --nodes 20 --protocol matching --adversary alie --adaptive-clip --rounds 30 --seed 10 --json
run failures_w     dtsim failures --workers 12 --domains 4 --availability 0.9 --domain-outage 0.01 --distribution weibull --seed 11 --json
run failures_e     dtsim failures --workers 16 --domains 4 --seed 12 --json
run topologies     dtsim topologies
rm -rf "$out/runs"; mkdir -p "$out/runs"
dtsim reproduce --quick --out "$out/runs/reproduce_quick" --executor serial --quiet >"$out/cli/reproduce_quick.out" 2>&1; echo $? >"$out/cli/reproduce_quick.rc"
for f in experiments/*.py; do
  n=$(basename "$f" .py)
  dtsim run "$f" --quick --out "$out/runs/${n}_quick" --executor serial --quiet >"$out/cli/run_${n}_quick.out" 2>&1; echo $? >"$out/cli/run_${n}_quick.rc"
done
if [ "$mode" = full ]; then
  dtsim reproduce --out "$out/runs/reproduce" --quiet >"$out/cli/reproduce.out" 2>&1; echo $? >"$out/cli/reproduce.rc"
  for f in experiments/*.py; do
    n=$(basename "$f" .py)
    dtsim run "$f" --out "$out/runs/${n}" --quiet >"$out/cli/run_${n}.out" 2>&1; echo $? >"$out/cli/run_${n}.rc"
  done
fi
echo "snapshot written to $out"

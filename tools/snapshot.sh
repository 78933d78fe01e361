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
run train_gpipe   dtsim train --stages 4 --replicas 1 --microbatches-per-step 8 --steps 5 --schedule gpipe --seed 13 --json
run train_1f1b_neq dtsim train --stages 4 --microbatches-per-step 6 --steps 2 --schedule 1f1b --forward-time 2.9,0.6,1.1,1.8 --backward-ratio 1.5 --replications 1 --seed 14 --json
run train_swarm   dtsim train --stages 8 --replicas 2 --schedule swarm --routing weighted --mtbf 2000 --replace-time 60 --price 0.9 --replications 4 --seed 15 --json
run train_ckpt    dtsim train --stages 4 --replicas 2 --steps 20 --mtbf 800 --replace-time 30 --checkpoint-every 4 --checkpoint-cost 5 --restart-cost 10 --price 3 --replications 4 --seed 16 --json
run train_trace   dtsim train --stages 6 --replicas 2 --failure-trace aws-p3 --trace-speedup 10 --steps 5 --price 3.06 --replications 3 --seed 17 --json
run train_skip    dtsim train --stages 8 --replicas 2 --schedule swarm --routing queue --availability 0.9 --mean-downtime 50 --skip-budget 2 --skip-penalty 0.1 --max-wait 5 --steps 3 --replications 4 --seed 18 --json
run queue_mmc     dtsim pipeline --queueing --stages 3 --replicas 1,2,3 --stage-time 1,2,3 --stage-time-distribution exponential --arrival poisson --rate 0.8 --availability 1 --seed 19 --json
run queue_fail    dtsim pipeline --queueing --stages 4 --replicas 2 --stage-time 1 --arrival poisson --rate 0.5 --availability 0.9 --max-wait 0 --seed 20 --json
run trace_stats   dtsim trace stats aws-p3 --json
run failures_tr   dtsim failures --failure-trace aws-p3 --workers 32 --seed 21 --json
run gossip_file   dtsim gossip --topology ring:n=12 --protocol matching --rounds 10 --replications 2 --seed 22 --json
run gossip_obj    dtsim gossip --objective quadratic --lr 0.1 --local-steps 2 --nodes 10 --protocol edge --adversary stubborn --adversary-value 5 --rounds 200 --seed 23 --json
run design_tr     dtsim design --stages 8 --availability 0.9 --skip-budget 1 --target-drop 1e-2 --json
printf 'src,dst,size,start\n0,5,100,0\n1,5,100,0\n2,30,50,1\n' >"$out/flows.csv"
run network_tree  dtsim network --topology tree:racks=2,hosts=20 --flows "$out/flows.csv" --json
run train_net     dtsim train --stages 4 --replicas 2 --network tree:racks=2,hosts=8 --param-size 50 --activation-size 5 --microbatches-per-step 8 --steps 3 --seed 30 --json
run train_net_blk dtsim train --stages 4 --replicas 1 --schedule 1f1b --network tree:racks=2,hosts=8 --p2p blocking --param-size 50 --activation-size 5 --microbatches-per-step 8 --steps 3 --seed 31 --replications 1 --json
run train_net_ft  dtsim train --stages 3 --replicas 2 --network tree:racks=2,hosts=8 --param-size 50 --activation-size 5 --mtbf 200 --replace-time 10 --steps 5 --checkpoint-node 0 --checkpoint-every 2 --checkpoint-cost 1 --restart-cost 2 --seed 37 --replications 2 --json
run train_plan_mit dtsim train --plan sim/profiles/data/runs/mit-N2_D1.json --model OPT-350 --steps 2 --replications 1 --json
run train_plan_cl dtsim train --plan sim/profiles/data/runs/clariden-OPT-350-N4_D2.json --model OPT-350 --steps 2 --replications 1 --json
run plan_mixed    dtsim plan --model OPT-350 --fleet-from-runs mit-N2_D1,mit-N2_D2 --top 3 --simulate 1 --json
run gossip_nic    dtsim gossip --nodes 12 --protocol async --rounds 5 --nic 2 --seed 36 --json
run queue_net     dtsim pipeline --queueing --stages 3 --replicas 2 --stage-time 1 --network tree:racks=2,hosts=8 --transfer-size 20 --rate 0.5 --routing least-loaded --seed 38 --json
run train_strat   dtsim train --stages 4 --replicas 2 --strategy checkpoint-restart --mtbf 500 --steps 20 --seed 39 --replications 2 --json
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

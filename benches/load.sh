#!/usr/bin/env bash
# Load run: wrk over TLS keep-alive against `preflight-gate serve`, posting
# an `oc adm upgrade --to 4.15.3` review whose old and new ClusterVersion are
# ~200 KB each. Prints throughput, latency percentiles and the gate's RSS
# idle and after the run. Figures go to docs/benchmarks.md.
#
#   benches/load.sh [duration=20s] [connections=32] [threads=2]
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-20s}
connections=${2:-32}
threads=${3:-2}

command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release --locked --quiet

work=$(mktemp -d)
gate_pid=
cleanup() { [ -n "$gate_pid" ] && kill "$gate_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

python3 - "$work/review.json" <<'PY'
import json, sys
img = lambda i: "quay.io/openshift-release-dev/ocp-release@sha256:%064x" % i
risk = lambda n, m: {"name": n, "url": "https://issues.redhat.com/browse/OCPBUGS-12345", "message": m,
                     "matchingRules": [{"type": "PromQL", "promql": {"promql": "group(cluster_operator_conditions{name=\"aro\"}) or 0 * group(cluster_operator_conditions)"}}]}
cv = {"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
      "metadata": {"name": "version", "uid": "3ba11aa4-3a62-47d1-9158-ec54d4c49e1d"},
      "spec": {"channel": "stable-4.15", "clusterID": "ea006e73-1e7a-4fbc-a12d-ae4109affb3d"},
      "status": {"desired": {"version": "4.14.1", "image": img(1)},
        "history": [{"state": "Completed", "version": "4.%d.%d" % (10 + i // 60, i % 60), "image": img(i),
                     "startedTime": "2025-01-01T00:00:00Z", "completionTime": "2025-01-01T01:00:00Z", "verified": True}
                    for i in range(150)],
        "availableUpdates": [{"version": "4.15.3", "image": "quay.io/openshift-release-dev/ocp-release@sha256:5e3a6c1f0b2748d9e1c7a0b8f6d3e2c1b0a9f8e7d6c5b4a39281706f5e4d3c2b"}],
        "conditionalUpdates": [{"release": {"version": "4.16.%d" % i, "image": img(10000 + i),
                                            "channels": ["candidate-4.16", "fast-4.16", "stable-4.16", "eus-4.16"]},
                                "risks": [risk("Risk%dA" % i, "Clusters with a particular configuration may see degraded networking after the update; see the linked bug for the details and the workaround."),
                                          risk("Risk%dB" % i, "Nodes may fail to boot after the kernel update on some hardware.")],
                                "conditions": [{"type": "Recommended", "status": "False", "reason": "MultipleReasons", "message": "Clusters may see degraded networking.", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}
                               for i in range(150)]}}
new = json.loads(json.dumps(cv)); new["spec"]["desiredUpdate"] = {"version": "4.15.3"}
review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
          "request": {"uid": "0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a00", "name": "version", "operation": "UPDATE",
                      "resource": {"group": "config.openshift.io", "version": "v1", "resource": "clusterversions"},
                      "userInfo": {"username": "system:admin"}, "object": new, "oldObject": cv}}
json.dump(review, open(sys.argv[1], "w"))
print("review: %d bytes, ~%d KiB per object" % (len(json.dumps(review)), len(json.dumps(cv)) // 1024))
PY

cat > "$work/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = io.open("$work/review.json"):read("*a")
LUA

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
admin=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
(cd "$work" && RUST_LOG=warn "$OLDPWD/target/release/preflight-gate" serve \
    --webhook-addr "127.0.0.1:$port" --admin-addr "127.0.0.1:$admin" --shutdown-delay 0s) &
gate_pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$admin/readyz" >/dev/null && break; sleep 0.1; done
rss() { awk '/VmRSS/ {print $2 " kB"}' "/proc/$gate_pid/status"; }
# CPU time of the gate in clock ticks (user + system).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$gate_pid/stat"; }
echo "idle RSS: $(rss)"
curl -sk -H 'Content-Type: application/json' --data-binary "@$work/review.json" \
    "https://localhost:$port/validate/clusterversion" | head -c 160; echo
before=$(cpu_ticks)
wrk --latency -t "$threads" -c "$connections" -d "$duration" -s "$work/post.lua" \
    "https://localhost:$port/validate/clusterversion" | tee "$work/wrk.out"
after=$(cpu_ticks)
echo "RSS after the run: $(rss)"
requests=$(awk '/requests in/ {print $1}' "$work/wrk.out")
hz=$(getconf CLK_TCK)
python3 - "$before" "$after" "$hz" "$requests" <<'PY'
import sys
before, after, hz, requests = (float(x) for x in sys.argv[1:])
cpu = (after - before) / hz
print("gate CPU: %.1f s for %d reviews: %.0f us per review, so %.0f reviews/s per core" % (cpu, requests, cpu / requests * 1e6, requests / cpu))
PY
curl -s "http://127.0.0.1:$admin/metrics" | grep -E '^preflight_gate_admission_reviews_total'

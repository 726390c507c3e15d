#!/usr/bin/env bash
# Runs svcnet's whole test suite: unit, integration, real-kernel tests (inside
# test-created network namespaces with no route out) and the end-to-end suite.
# Needs root and the packages of scripts/install.sh. Exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
start=$(date +%s)
go build ./...
go vet ./...
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*'))
if [ -n "$unformatted" ]; then
	echo "gofmt: not formatted: $unformatted" >&2
	exit 1
fi
# Packages run two at a time (the machine has two cores); every package that
# needs a kernel feature or a program says so in its skip message.
go test -count=1 -p 2 -timeout 30m ./... "$@"
# hack/kpdiff is its own Go module (svcnet must not depend on
# k8s.io/kubernetes). It runs svcnet's iptables, nftables and IPVS modes beside
# kube-proxy's own proxiers on 5,000 generated scenarios and exits non-zero
# on any difference. Building it cold costs about 270 CPU-seconds, and the
# run about 15.
(cd hack/kpdiff && go vet . && go test -count=1 . && go run . -n 5000 -seed 1 -show 3)
# bench/run (its own module, as it builds kube-proxy's IPVS proxier from
# k8s.io/kubernetes, cached by kpdiff's build above): the benchmark harness's
# own tests (report sections kept across partial runs, output parsing); the
# benchmarks themselves are not run here.
(cd bench/run && go vet . && go test -count=1 .)
# hack/apidiff (its own module): svcnet's Service/Endpoints/EndpointSlice
# defaulting and validation and Pod/Deployment defaulting against Kubernetes
# 1.37.2's own code, 2,000 random cases per kind (about 350 CPU-seconds to
# build from a cold cache, seconds to run). -mod=mod follows dependency
# changes of the main module without a manual tidy.
(cd hack/apidiff && go vet -mod=mod . && go run -mod=mod . -n 2000)
# e2e/interop (its own module): the real components at Kubernetes 1.37.2 on
# svcnet and svcnet on the real control plane, built here from k8s.io/kubernetes
# and CoreDNS 1.15.0 from the Go module proxy: kube-proxy (iptables and
# nftables, real packets in test namespaces), kube-controller-manager (its
# EndpointSlice, mirroring, Deployment and ReplicaSet controllers against
# svcnet's on the same inputs), CoreDNS, and svcnet proxy/dns/controllers on
# kube-apiserver + etcd, and MetalLB v0.15.2's controller and speaker against
# svcnet's lbipam and speaker on the same inputs (built in e2e/interop/metallbbuild, its own
# module with MetalLB's dependency versions). Cold builds cost about 2,000
# CPU-seconds (see e2e/interop/README.md); the tests themselves about 4 minutes.
GOBIN=$PWD/bin go install github.com/coredns/coredns@v1.15.0
(cd e2e/interop/metallbbuild && go build -o ../../../bin/metallb-controller go.universe.tf/metallb/controller && go build -o ../../../bin/metallb-speaker go.universe.tf/metallb/speaker)
(cd e2e/interop && go vet . && SVCNET_COREDNS=$PWD/../../bin/coredns SVCNET_METALLB_CONTROLLER=$PWD/../../bin/metallb-controller SVCNET_METALLB_SPEAKER=$PWD/../../bin/metallb-speaker go test -count=1 -timeout 60m .)
echo "test suite took $(( $(date +%s) - start ))s"

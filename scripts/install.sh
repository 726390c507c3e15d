#!/usr/bin/env bash
# Installs what svcnet needs on a Debian 12 machine and builds the binary to
# /usr/local/bin/svcnet. Run as root. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends $(grep -v '^#' .ci/packages)
# Debian's etcd-server package may start a system etcd on 127.0.0.1:2379; svcnet
# never needs it (tests start their own on free ports), so stop it if it runs.
if command -v systemctl >/dev/null 2>&1; then systemctl disable --now etcd >/dev/null 2>&1 || true; fi
# bird2 is the BGP router of the BGP-mode tests (run inside test namespaces with
# their own config); Debian's package may start a system bird: stop it too.
if command -v systemctl >/dev/null 2>&1; then systemctl disable --now bird >/dev/null 2>&1 || true; fi
export PATH=$PATH:/usr/local/go/bin
go mod download
# svcnet carries the real kubectl (k8s.io/kubectl, `svcnet kubectl`); stamp it
# with the Kubernetes release of that module (v0.X.Y is v1.X.Y), as Kubernetes'
# own build does.
kv=$(go list -m -f '{{.Version}}' k8s.io/kubectl)
kminor=$(echo "$kv" | cut -d. -f2)
go build -ldflags "-X k8s.io/component-base/version.gitVersion=v1.${kv#v0.} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${kminor} -X k8s.io/component-base/version.gitTreeState=clean" \
  -o /usr/local/bin/svcnet ./cmd/svcnet
echo "svcnet installed: $(/usr/local/bin/svcnet version)"
# The tests and the tutorial drive kubectl. Where none is installed, the one
# built into svcnet answers to that name.
if ! command -v kubectl >/dev/null 2>&1; then
  ln -sf /usr/local/bin/svcnet /usr/local/bin/kubectl
  echo "kubectl: linked to svcnet ($(kubectl version --client | head -1))"
fi

#!/usr/bin/env bash
# Installs what svcnet needs on a Debian 12 machine and builds the binary to
# /usr/local/bin/svcnet. Run as root. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends $(grep -v '^#' .ci/packages)
# The real kubectl drives the end-to-end tests. This machine image ships it as the
# `kubectl` package (Google Cloud SDK repository; Debian's own kubernetes-client
# is 1.20, too old). Install it when it is missing and the package is available.
if ! command -v kubectl >/dev/null 2>&1; then
  apt-get install -y --no-install-recommends kubectl || echo "install.sh: no kubectl package available; kubectl-driven tests will fail" >&2
fi
# Debian's etcd-server package may start a system etcd on 127.0.0.1:2379; svcnet
# never needs it (tests start their own on free ports), so stop it if it runs.
if command -v systemctl >/dev/null 2>&1; then systemctl disable --now etcd >/dev/null 2>&1 || true; fi
export PATH=$PATH:/usr/local/go/bin
go mod download
go build -o /usr/local/bin/svcnet ./cmd/svcnet
echo "svcnet installed: $(/usr/local/bin/svcnet version)"

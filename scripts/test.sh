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
# Packages run two at a time (the machine has two cores); every package that
# needs a kernel feature or a program says so in its skip message.
go test -count=1 -p 2 -timeout 30m ./... "$@"
echo "test suite took $(( $(date +%s) - start ))s"

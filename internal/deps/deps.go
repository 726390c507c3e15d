// Package deps pins the module's third-party dependencies while the packages
// that use them are being written, so that `go mod tidy` keeps go.mod stable
// for everyone working in the tree. Remove an import here once real code uses it.
package deps

import (
	_ "github.com/miekg/dns"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/pflag"
	_ "github.com/vishvananda/netlink"
	_ "github.com/vishvananda/netns"
	_ "go.etcd.io/etcd/client/v3"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "golang.org/x/sys/unix"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/util/managedfields"
	_ "k8s.io/apimachinery/pkg/util/strategicpatch"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/client-go/applyconfigurations"
	_ "k8s.io/client-go/tools/cache"
	_ "k8s.io/kube-openapi/pkg/spec3"
	_ "sigs.k8s.io/knftables"
	_ "sigs.k8s.io/yaml"
)

package cluster

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/svcnet/svcnet/apiserver"
	"github.com/svcnet/svcnet/apiserver/authz"
)

// componentKubeconfig is where the kubeconfig of component name lives:
// <data-dir>/kubeconfigs/<name>.kubeconfig.
func componentKubeconfig(dataDir, name string) string {
	return filepath.Join(dataDir, "kubeconfigs", name+".kubeconfig")
}

// writeComponentKubeconfigs issues one client certificate per component of
// the cluster, signed by the apiserver's CA under apiDir, and writes a
// kubeconfig for each, keyed by component: every node agent acts as
// system:node:<name> in system:nodes (Node authorizer), the proxies as
// system:kube-proxy (system:node-proxier), the DNS servers as the coredns
// service account of kube-system (system:coredns, as kubeadm binds it), the
// network-policy agents as kube-system/svcnet-netpol (svcnet:netpol), the
// speakers as metallb-system/speaker (svcnet:speaker), the Ingress
// controller as kube-system/svcnet-ingress (svcnet:ingress) and
// the controllers as system:kube-controller-manager (bound to the
// system:controller:* roles of the controllers svcnet runs).
func writeComponentKubeconfigs(cfg Config, apiDir, server string) (map[string]string, error) {
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "kubeconfigs"), 0o700); err != nil {
		return nil, err
	}
	type identity struct {
		user   string
		groups []string
	}
	ids := map[string]identity{
		"proxy":       {user: authz.ProxyUser},
		"controllers": {user: authz.ControllersUser},
		"dns":         {user: authz.DNSUser, groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}},
		"netpol":      {user: authz.NetpolUser, groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}},
		"ingress":     {user: authz.IngressUser, groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}},
		"speaker":     {user: authz.SpeakerUser, groups: []string{"system:serviceaccounts", "system:serviceaccounts:metallb-system"}},
	}
	for i := 1; i <= cfg.Nodes; i++ {
		name := NodeName(cfg.Prefix, i)
		ids["node-"+name] = identity{user: authz.NodeUserPrefix + name, groups: []string{authz.SystemNodes}}
	}
	out := map[string]string{}
	for comp, id := range ids {
		path := componentKubeconfig(cfg.DataDir, comp)
		if err := apiserver.WriteClientKubeconfig(apiDir, path, server, id.user, id.groups); err != nil {
			return nil, fmt.Errorf("kubeconfig for %s: %w", comp, err)
		}
		out[comp] = path
	}
	return out, nil
}

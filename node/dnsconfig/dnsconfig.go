// Package dnsconfig writes a pod's /etc/resolv.conf, /etc/hosts and
// /etc/hostname the way the kubelet (and the container runtime writing its
// result) does.
//
// resolv.conf follows the pod's dnsPolicy:
//   - ClusterFirst (the default): the cluster DNS servers, the search path
//     "<ns>.svc.<domain> svc.<domain> <domain>" followed by the node's own
//     search domains (duplicates dropped), and "options ndots:5". A
//     host-network pod with ClusterFirst falls back to Default, as in the
//     kubelet; ClusterFirstWithHostNet keeps the cluster settings.
//   - Default: the node's resolv.conf (nameservers, search, options).
//   - None: nothing but the pod's dnsConfig.
//
// For every policy, the pod's dnsConfig is merged in last: nameservers and
// searches are appended without duplicates, options are merged by name
// (the pod's value wins). The result is then cut to the kubelet's limits:
// three nameservers, 32 search domains and 2048 characters of search list.
package dnsconfig

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"strings"

	v1 "k8s.io/api/core/v1"
)

// Kubelet limits on what a pod's resolv.conf may hold.
const (
	MaxNameservers     = 3
	MaxSearchPaths     = 32
	MaxSearchListChars = 2048
)

// Config is the DNS configuration of one pod, ready to be written.
type Config struct {
	Nameservers []string
	Searches    []string
	Options     []string
}

// Cluster describes the cluster DNS a node offers its pods.
type Cluster struct {
	// Servers are the cluster DNS addresses (the kube-dns Service IP,
	// 10.96.0.10 by default). If empty, ClusterFirst pods get the node's
	// configuration, as the kubelet does when --cluster-dns is unset.
	Servers []string
	// Domain is the cluster domain, "cluster.local" by default.
	Domain string
	// Host is the node's own resolver configuration (its /etc/resolv.conf).
	Host Config
}

// ParseResolvConf reads nameserver, search/domain and options lines. A
// trailing dot on search domains is dropped, and "." entries are skipped.
func ParseResolvConf(r io.Reader) (Config, error) {
	var c Config
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) > 1 {
				c.Nameservers = append(c.Nameservers, f[1])
			}
		case "domain", "search":
			// The last search or domain line wins, as in the resolver.
			c.Searches = nil
			for _, s := range f[1:] {
				if s != "." {
					c.Searches = append(c.Searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			c.Options = append(c.Options, f[1:]...)
		}
	}
	if err := sc.Err(); err != nil {
		return Config{}, fmt.Errorf("read resolv.conf: %w", err)
	}
	return c, nil
}

// ForPod computes a pod's DNS configuration.
func ForPod(pod *v1.Pod, cl Cluster) Config {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = v1.DNSClusterFirst
	}
	if policy == v1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = v1.DNSDefault
	}
	var c Config
	switch policy {
	case v1.DNSNone:
	case v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet:
		if len(cl.Servers) > 0 {
			c.Nameservers = append([]string(nil), cl.Servers...)
			c.Searches = clusterSearches(pod.Namespace, cl.Domain, cl.Host.Searches)
			c.Options = []string{"ndots:5"}
			break
		}
		c = copyConfig(cl.Host)
	default: // Default
		c = copyConfig(cl.Host)
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		c.Nameservers = dedupe(append(c.Nameservers, dc.Nameservers...))
		c.Searches = dedupe(append(c.Searches, dc.Searches...))
		c.Options = mergeOptions(c.Options, dc.Options)
	}
	return fitLimits(c)
}

func copyConfig(c Config) Config {
	return Config{
		Nameservers: append([]string(nil), c.Nameservers...),
		Searches:    append([]string(nil), c.Searches...),
		Options:     append([]string(nil), c.Options...),
	}
}

func clusterSearches(ns, domain string, host []string) []string {
	if domain == "" {
		return append([]string(nil), host...)
	}
	s := []string{ns + ".svc." + domain, "svc." + domain, domain}
	return dedupe(append(s, host...))
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// mergeOptions merges by option name; the pod's value wins. The kubelet
// goes through a map (random order); svcnet keeps the existing options in
// place and appends new ones in the pod's order, so the file is stable.
func mergeOptions(existing []string, pod []v1.PodDNSConfigOption) []string {
	type opt struct{ name, value string }
	var list []opt
	index := map[string]int{}
	set := func(name, value string) {
		if i, ok := index[name]; ok {
			list[i].value = value
			return
		}
		index[name] = len(list)
		list = append(list, opt{name, value})
	}
	for _, o := range existing {
		name, value, _ := strings.Cut(o, ":")
		set(name, value)
	}
	for _, o := range pod {
		v := ""
		if o.Value != nil {
			v = *o.Value
		}
		set(o.Name, v)
	}
	out := make([]string, 0, len(list))
	for _, o := range list {
		if o.value != "" {
			out = append(out, o.name+":"+o.value)
		} else {
			out = append(out, o.name)
		}
	}
	return out
}

func fitLimits(c Config) Config {
	if len(c.Nameservers) > MaxNameservers {
		c.Nameservers = c.Nameservers[:MaxNameservers]
	}
	if len(c.Searches) > MaxSearchPaths {
		c.Searches = c.Searches[:MaxSearchPaths]
	}
	for len(c.Searches) > 0 && len(strings.Join(c.Searches, " ")) > MaxSearchListChars {
		c.Searches = c.Searches[:len(c.Searches)-1]
	}
	return c
}

// ResolvConf renders c as the container runtime writes it: search, then one
// nameserver line per server, then options. Empty sections are left out.
func (c Config) ResolvConf() []byte {
	var b bytes.Buffer
	if len(c.Searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(c.Searches, " "))
	}
	for _, ns := range c.Nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if len(c.Options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(c.Options, " "))
	}
	return b.Bytes()
}

// Hostname returns the pod's hostname and, when it has a subdomain, its
// domain ("<subdomain>.<ns>.svc.<clusterDomain>"), as the kubelet computes
// them: spec.hostname if set, else the pod name cut to 63 characters (and
// never ending in '-' or '.').
func Hostname(pod *v1.Pod, clusterDomain string) (host, domain string) {
	host = pod.Spec.Hostname
	if host == "" {
		host = pod.Name
		if len(host) > 63 {
			host = strings.TrimRight(host[:63], "-.")
		}
	}
	if pod.Spec.Subdomain != "" && clusterDomain != "" {
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain)
	}
	return host, domain
}

// Hosts renders the kubelet-managed /etc/hosts of a pod with the given IPs.
// hostAliases come last under their own comment, one line per alias entry
// with its hostnames separated by tabs.
func Hosts(podIPs []string, host, domain string, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString("# Kubernetes-managed hosts file.\n")
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, host, domain, host)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, host)
		}
	}
	if len(aliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range aliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.Bytes()
}

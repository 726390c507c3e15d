package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"github.com/svcnet/svcnet/proxy"
)

// Fixed chains, as kube-proxy names them.
const (
	ChainServices         = "KUBE-SERVICES"
	ChainExternalServices = "KUBE-EXTERNAL-SERVICES"
	ChainNodePorts        = "KUBE-NODEPORTS"
	ChainPostrouting      = "KUBE-POSTROUTING"
	ChainMarkMasq         = "KUBE-MARK-MASQ"
	ChainForward          = "KUBE-FORWARD"
	ChainProxyFirewall    = "KUBE-PROXY-FIREWALL"
	ChainProxyCanary      = "KUBE-PROXY-CANARY"
	// ChainKubeletFirewall is kubelet's chain blocking martian localhost
	// traffic; kube-proxy fills it when localhost NodePorts are enabled.
	ChainKubeletFirewall = "KUBE-FIREWALL"
)

// Prefixes of the per-service and per-endpoint chains.
const (
	prefixSVC = "KUBE-SVC-"
	prefixSVL = "KUBE-SVL-"
	prefixEXT = "KUBE-EXT-"
	prefixFW  = "KUBE-FW-"
	prefixSEP = "KUBE-SEP-"
)

// portProtoHash is the first 16 characters of base32(sha256(name+proto)),
// kube-proxy's chain-name suffix for a service port.
func portProtoHash(svcPortName, proto string) string {
	h := sha256.Sum256([]byte(svcPortName + proto))
	return base32.StdEncoding.EncodeToString(h[:])[:16]
}

func protoLower(p *proxy.ServicePort) string { return strings.ToLower(string(p.Protocol)) }

// ClusterPolicyChain returns the KUBE-SVC- chain of a service port: all
// usable endpoints of the cluster.
func ClusterPolicyChain(p *proxy.ServicePort) string {
	return prefixSVC + portProtoHash(p.Name.String(), protoLower(p))
}

// LocalPolicyChain returns the KUBE-SVL- chain: this node's endpoints only.
func LocalPolicyChain(p *proxy.ServicePort) string {
	return prefixSVL + portProtoHash(p.Name.String(), protoLower(p))
}

// ExternalChain returns the KUBE-EXT- chain for NodePort, externalIP and
// LoadBalancer traffic.
func ExternalChain(p *proxy.ServicePort) string {
	return prefixEXT + portProtoHash(p.Name.String(), protoLower(p))
}

// FirewallChain returns the KUBE-FW- chain enforcing loadBalancerSourceRanges.
func FirewallChain(p *proxy.ServicePort) string {
	return prefixFW + portProtoHash(p.Name.String(), protoLower(p))
}

// EndpointChain returns the KUBE-SEP- chain of one endpoint of a service
// port: base32(sha256(portName + proto + "ip:port")) truncated to 16.
func EndpointChain(p *proxy.ServicePort, ep *proxy.Endpoint) string {
	h := sha256.Sum256([]byte(p.Name.String() + protoLower(p) + ep.String()))
	return prefixSEP + base32.StdEncoding.EncodeToString(h[:])[:16]
}

// isServiceChainName reports whether a chain is a per-service or
// per-endpoint chain this mode creates (and may delete when unused).
func isServiceChainName(chain string) bool {
	for _, p := range []string{prefixSVC, prefixSVL, prefixEXT, prefixFW, prefixSEP, prefixDST} {
		if strings.HasPrefix(chain, p) {
			return true
		}
	}
	return false
}

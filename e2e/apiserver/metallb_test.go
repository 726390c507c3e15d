package apiserver_e2e

import (
	"regexp"
	"testing"
)

// TestKubectlMetalLBColumns: kubectl get shows the MetalLB kinds with
// their CRDs' printer columns (MetalLB v0.16.2) and the pool's schema
// defaults, as on a cluster where kube-apiserver serves MetalLB's CRDs.
func TestKubectlMetalLBColumns(t *testing.T) {
	k := newKubectl(t)
	k.ok("create", "namespace", "metallb-system")
	mustMatch(t, k.ok("apply", "-f", writeTemp(t, `apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: first-pool, namespace: metallb-system}
spec:
  addresses: [192.168.10.0/24]
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: l2, namespace: metallb-system}
spec:
  ipAddressPools: [first-pool]
  nodeSelectors: [{matchLabels: {rack: a}}]
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: peer, namespace: metallb-system}
spec: {myASN: 64512, peerASN: 64500, peerAddress: 172.18.0.1}
---
apiVersion: metallb.io/v1beta1
kind: Community
metadata: {name: communities, namespace: metallb-system}
spec:
  communities: [{name: vpn, value: '65535:65282'}]
`)), `ipaddresspool.metallb.io/first-pool created`, `bgppeer.metallb.io/peer created`)

	out := k.ok("get", "ipaddresspools", "-n", "metallb-system")
	mustMatch(t, out, `(?m)^NAME\s+AUTO ASSIGN\s+AVOID BUGGY IPS\s+ADDRESSES\s*$`, `(?m)^first-pool\s+true\s+false\s+\["192\.168\.10\.0/24"\]\s*$`)
	mustMatch(t, k.ok("get", "ipaddresspool", "first-pool", "-n", "metallb-system", "-o", "jsonpath={.spec.autoAssign} {.spec.avoidBuggyIPs}"), `^true false$`)

	// Node Selectors has priority 10: shown with -o wide only. Missing
	// fields (nil cells) print empty.
	out = k.ok("get", "l2advertisements", "-n", "metallb-system")
	mustMatch(t, out, `(?m)^NAME\s+IPADDRESSPOOLS\s+IPADDRESSPOOL SELECTORS\s+INTERFACES\s*$`, `(?m)^l2\s+\["first-pool"\]\s*$`)
	mustMatch(t, k.ok("get", "l2advertisements", "-n", "metallb-system", "-o", "wide"),
		`(?m)^NAME\s+IPADDRESSPOOLS\s+IPADDRESSPOOL SELECTORS\s+INTERFACES\s+NODE SELECTORS\s*$`,
		`(?m)^l2\s+\["first-pool"\]\s+\[\{"matchLabels":\{"rack":"a"\}\}\]\s*$`)

	for _, res := range []string{"bgppeers", "bgppeers.v1beta1.metallb.io"} {
		mustMatch(t, k.ok("get", res, "-n", "metallb-system"), `(?m)^NAME\s+ADDRESS\s+ASN\s+BFD PROFILE\s+MULTI HOPS\s*$`, `(?m)^peer\s+172\.18\.0\.1\s+64500\s*$`)
	}
	out = k.ok("get", "communities", "-n", "metallb-system")
	mustMatch(t, out, `(?m)^NAME\s+AGE\s*$`, `(?m)^communities\s+\d+s\s*$`)
	if regexp.MustCompile(`CREATED AT`).MatchString(out) {
		t.Errorf("communities printed with the default table:\n%s", out)
	}
}

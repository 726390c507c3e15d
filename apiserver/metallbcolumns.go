package apiserver

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/apiserver/tables"
)

// metallbColumns are the additionalPrinterColumns of MetalLB v0.16.2's
// CRDs (config/crd/bases), per served version: kubectl get shows the
// MetalLB kinds with them, as on a cluster where kube-apiserver serves them
// from the CRDs. A version listed without columns (Community's CRD has
// none) gets kube-apiserver's default for CRDs: Name and Age.
var metallbColumns = map[schema.GroupVersionResource][]tables.CRDColumn{
	metallbGV.WithResource("ipaddresspools"): {
		{Name: "Auto Assign", Type: "boolean", JSONPath: ".spec.autoAssign"},
		{Name: "Avoid Buggy IPs", Type: "boolean", JSONPath: ".spec.avoidBuggyIPs"},
		{Name: "Addresses", Type: "string", JSONPath: ".spec.addresses"},
	},
	metallbGV.WithResource("l2advertisements"): {
		{Name: "IPAddressPools", Type: "string", JSONPath: ".spec.ipAddressPools"},
		{Name: "IPAddressPool Selectors", Type: "string", JSONPath: ".spec.ipAddressPoolSelectors"},
		{Name: "Interfaces", Type: "string", JSONPath: ".spec.interfaces"},
		{Name: "Node Selectors", Type: "string", Priority: 10, JSONPath: ".spec.nodeSelectors"},
	},
	metallbGV.WithResource("bgpadvertisements"): {
		{Name: "IPAddressPools", Type: "string", JSONPath: ".spec.ipAddressPools"},
		{Name: "IPAddressPool Selectors", Type: "string", JSONPath: ".spec.ipAddressPoolSelectors"},
		{Name: "Peers", Type: "string", JSONPath: ".spec.peers"},
		{Name: "Node Selectors", Type: "string", Priority: 10, JSONPath: ".spec.nodeSelectors"},
	},
	metallbV1beta2.WithResource("bgppeers"): metallbPeerColumns,
	metallbGV.WithResource("bgppeers"):      metallbPeerColumns,
	metallbGV.WithResource("communities"):   nil,
	metallbGV.WithResource("bfdprofiles"): {
		{Name: "Passive Mode", Type: "boolean", JSONPath: ".spec.passiveMode"},
		{Name: "Transmit Interval", Type: "integer", JSONPath: ".spec.transmitInterval"},
		{Name: "Receive Interval", Type: "integer", JSONPath: ".spec.receiveInterval"},
		{Name: "Multiplier", Type: "integer", JSONPath: ".spec.detectMultiplier"},
	},
	metallbGV.WithResource("configurationstates"): {
		{Name: "Result", Type: "string", JSONPath: ".status.result"},
		{Name: "ErrorSummary", Type: "string", JSONPath: ".status.errorSummary"},
		{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	},
	metallbGV.WithResource("servicel2statuses"): {
		{Name: "Allocated Node", Type: "string", JSONPath: ".status.node"},
		{Name: "Service Name", Type: "string", JSONPath: ".status.serviceName"},
		{Name: "Service Namespace", Type: "string", JSONPath: ".status.serviceNamespace"},
	},
	metallbGV.WithResource("servicebgpstatuses"): {
		{Name: "Node", Type: "string", JSONPath: ".status.node"},
		{Name: "Service Name", Type: "string", JSONPath: ".status.serviceName"},
		{Name: "Service Namespace", Type: "string", JSONPath: ".status.serviceNamespace"},
	},
}

// metallbPeerColumns are BGPPeer's, the same in v1beta1 and v1beta2.
var metallbPeerColumns = []tables.CRDColumn{
	{Name: "Address", Type: "string", JSONPath: ".spec.peerAddress"},
	{Name: "ASN", Type: "string", JSONPath: ".spec.peerASN"},
	{Name: "BFD Profile", Type: "string", JSONPath: ".spec.bfdProfile"},
	{Name: "Multi Hops", Type: "string", JSONPath: ".spec.ebgpMultiHop"},
}

// crdTables are the table convertors of the resources served as custom
// resources, by served version.
var crdTables = func() map[schema.GroupVersionResource]*tables.CRDTable {
	m := make(map[schema.GroupVersionResource]*tables.CRDTable, len(metallbColumns))
	for gvr, cols := range metallbColumns {
		t, err := tables.NewCRDTable(cols)
		if err != nil {
			panic(fmt.Sprintf("printer columns of %s: %v", gvr, err))
		}
		m[gvr] = t
	}
	return m
}()

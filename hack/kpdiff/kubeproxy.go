package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	sysctltest "k8s.io/component-helpers/node/util/sysctl/testing"
	"k8s.io/kubernetes/pkg/proxy"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/conntrack"
	"k8s.io/kubernetes/pkg/proxy/healthcheck"
	kpiptables "k8s.io/kubernetes/pkg/proxy/iptables"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	kpnftables "k8s.io/kubernetes/pkg/proxy/nftables"
	"k8s.io/kubernetes/pkg/proxy/runner"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	proxyutiltest "k8s.io/kubernetes/pkg/proxy/util/testing"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// kube-proxy's per-package constructors for its ServicePort and Endpoint
// types (newServiceInfo, newEndpointInfo) are unexported; the change
// trackers of one proxier built with the public NewProxier hold them, and
// every scenario gets fresh trackers made with the same functions.
type makers struct {
	svc, ep reflect.Value
}

var (
	makersOnce           sync.Once
	iptMakers, nftMakers makers
	makersErr            error
	svcTrackerType       = reflect.TypeOf(proxy.NewServiceChangeTracker)
	epTrackerType        = reflect.TypeOf(proxy.NewEndpointsChangeTracker)
	noopRunner           = runner.NewBoundedFrequencyRunner("kpdiff", func() error { return nil }, time.Hour, time.Hour, time.Hour)
	discardLogger        = logr.Discard()
)

func kpConfig() *kubeproxyconfig.KubeProxyConfiguration {
	return &kubeproxyconfig.KubeProxyConfiguration{
		IPTables:      kubeproxyconfig.KubeProxyIPTablesConfiguration{MasqueradeBit: ptr.To[int32](14), LocalhostNodePorts: ptr.To(true)},
		NFTables:      kubeproxyconfig.KubeProxyNFTablesConfiguration{MasqueradeBit: ptr.To[int32](14)},
		SyncPeriod:    metav1.Duration{Duration: time.Hour},
		MinSyncPeriod: metav1.Duration{Duration: time.Hour},
	}
}

func makersOf(p any) makers {
	st := get(p, "serviceChanges").Interface()
	et := get(p, "endpointsChanges").Interface()
	cache := get(et, "endpointSliceCache").Interface()
	return makers{svc: get(st, "makeServiceInfo"), ep: get(cache, "makeEndpointInfo")}
}

// initMakers builds one proxier of each kind through kube-proxy's public
// NewProxier (with fake iptables and sysctl; the nftables one checks that
// nft works, through `nft --check`, which changes nothing) only to take its
// tracker constructors. These proxiers are never synced.
func initMakers() error {
	makersOnce.Do(func() {
		ctx := context.Background()
		ipt, err := kpiptables.NewProxier(ctx, kpConfig(), v1.IPv4Protocol, iptablestest.NewFake(), sysctltest.NewFake(),
			proxyutil.NewNoOpLocalDetector(), "template", net.ParseIP("127.0.0.1"), nil, nil, false)
		if err != nil {
			makersErr = fmt.Errorf("kube-proxy iptables NewProxier: %w", err)
			return
		}
		iptMakers = makersOf(ipt)
		os.Setenv("KUBE_PROXY_NFTABLES_SKIP_KERNEL_VERSION_CHECK", "1")
		nft, err := kpnftables.NewProxier(ctx, kpConfig(), v1.IPv4Protocol, proxyutil.NewNoOpLocalDetector(), "template",
			net.ParseIP("127.0.0.1"), nil, nil, false)
		if err != nil {
			makersErr = fmt.Errorf("kube-proxy nftables NewProxier (needs the nft binary): %w", err)
			return
		}
		nftMakers = makersOf(nft)
	})
	return makersErr
}

func (m makers) trackers(fam v1.IPFamily, nodeName string) (*proxy.ServiceChangeTracker, *proxy.EndpointsChangeTracker) {
	st := reflect.ValueOf(proxy.NewServiceChangeTracker).Call([]reflect.Value{
		reflect.ValueOf(fam), m.svc.Convert(svcTrackerType.In(1)), reflect.Zero(svcTrackerType.In(2))})[0]
	et := reflect.ValueOf(proxy.NewEndpointsChangeTracker).Call([]reflect.Value{
		reflect.ValueOf(fam), reflect.ValueOf(nodeName), m.ep.Convert(epTrackerType.In(2)), reflect.Zero(epTrackerType.In(3))})[0]
	return st.Interface().(*proxy.ServiceChangeTracker), et.Interface().(*proxy.EndpointsChangeTracker)
}

// fakeNetwork lists the scenario's local addresses (lo plus the node's).
func fakeNetwork(sc *Scenario) proxyutil.NetworkInterfacer {
	n := proxyutiltest.NewFakeNetwork()
	n.AddInterfaceAddr(&net.Interface{Index: 0, Name: "lo"}, []net.Addr{
		&net.IPNet{IP: net.ParseIP("127.0.0.1"), Mask: net.CIDRMask(8, 32)},
		&net.IPNet{IP: net.ParseIP("::1"), Mask: net.CIDRMask(128, 128)},
	})
	var addrs []net.Addr
	for _, a := range sc.NodeIPs {
		bits := 24
		if a.Is6() {
			bits = 64
		}
		addrs = append(addrs, &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, a.BitLen())})
	}
	n.AddInterfaceAddr(&net.Interface{Index: 1, Name: "eth0"}, addrs)
	return n
}

func detector(sc *Scenario, fam v1.IPFamily) proxyutil.LocalTrafficDetector {
	if c := sc.podCIDR(fam); c != "" {
		return proxyutil.NewDetectLocalByCIDR(c)
	}
	return proxyutil.NewNoOpLocalDetector()
}

func nodeIP(sc *Scenario, fam v1.IPFamily) net.IP {
	if a := sc.primaryIP(fam); a.IsValid() {
		return net.IP(a.AsSlice())
	}
	if fam == v1.IPv6Protocol {
		return net.ParseIP("::1")
	}
	return net.ParseIP("127.0.0.1")
}

// feed gives kube-proxy the scenario the way its informers would: every
// object added, then both "synced" callbacks; the second runs
// syncProxyRules (a full sync) synchronously.
func feed(p interface {
	OnServiceAdd(*v1.Service)
	OnEndpointSliceAdd(*discovery.EndpointSlice)
	OnServiceSynced()
	OnEndpointSlicesSynced()
}, sc *Scenario) {
	for _, s := range sc.Services {
		p.OnServiceAdd(s.DeepCopy())
	}
	for _, s := range sc.Slices {
		p.OnEndpointSliceAdd(s.DeepCopy())
	}
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
}

// setBase fills the fields every kube-proxy proxier has, as its
// NewFakeProxier does: the trackers (made with m's constructors), the node,
// the fakes for conntrack and the health-check server.
func setBase(p any, m makers, sc *Scenario, fam v1.IPFamily) {
	st, et := m.trackers(fam, sc.NodeName)
	set(p, "ipFamily", fam)
	set(p, "svcPortMap", make(proxy.ServicePortMap))
	set(p, "serviceChanges", st)
	set(p, "endpointsMap", make(proxy.EndpointsMap))
	set(p, "endpointsChanges", et)
	set(p, "topologyLabels", sc.nodeLabels())
	set(p, "syncRunner", noopRunner)
	set(p, "syncPeriod", time.Hour)
	set(p, "masqueradeAll", sc.MasqueradeAll)
	set(p, "masqueradeMark", fmt.Sprintf("%#08x", 1<<sc.MasqueradeBit))
	set(p, "conntrack", conntrack.NewFake())
	set(p, "localDetector", detector(sc, fam))
	set(p, "nodeName", sc.NodeName)
	set(p, "nodeIP", nodeIP(sc, fam))
	set(p, "serviceHealthServer", healthcheck.NewFakeServiceHealthServer())
	set(p, "networkInterfacer", fakeNetwork(sc))
	set(p, "logger", discardLogger)
}

// kubeProxyIPTables runs kube-proxy's iptables proxier for one family and
// returns iptables-save output of its nat, filter and mangle tables.
func kubeProxyIPTables(sc *Scenario, fam v1.IPFamily) (string, error) {
	var ipt *iptablestest.FakeIPTables
	if fam == v1.IPv6Protocol {
		ipt = iptablestest.NewIPv6Fake()
	} else {
		ipt = iptablestest.NewFake()
	}
	npa := proxyutil.NewNodePortAddresses(fam, sc.NodePortAddresses)
	p := &kpiptables.Proxier{}
	setBase(p, iptMakers, sc, fam)
	set(p, "needFullSync", true)
	set(p, "iptables", utiliptables.Interface(ipt))
	set(p, "precomputedProbabilities", make([]string, 0, 1001))
	set(p, "iptablesData", bytes.NewBuffer(nil))
	set(p, "existingFilterChainsData", bytes.NewBuffer(nil))
	set(p, "filterChains", proxyutil.NewLineBuffer())
	set(p, "filterRules", proxyutil.NewLineBuffer())
	set(p, "natChains", proxyutil.NewLineBuffer())
	set(p, "natRules", proxyutil.NewLineBuffer())
	set(p, "localhostNodePorts", npa.ContainsIPv4Loopback())
	set(p, "nodePortAddresses", npa)
	// nfacct counters off: svcnet does not write nfacct matches (see
	// docs/proxy-modes.md).
	set(p, "nfAcctCounters", map[string]bool{
		metrics.IPTablesCTStateInvalidDroppedNFAcctCounter: false,
		metrics.LocalhostNodePortAcceptedNFAcctCounter:     false,
	})
	// The real utiliptables Monitor, started by NewProxier, creates the
	// canary chains; the fake's Monitor does nothing.
	for _, t := range []utiliptables.Table{utiliptables.TableMangle, utiliptables.TableNAT, utiliptables.TableFilter} {
		if _, err := ipt.EnsureChain(t, "KUBE-PROXY-CANARY"); err != nil {
			return "", err
		}
	}
	feed(p, sc)
	var out strings.Builder
	for _, t := range []utiliptables.Table{utiliptables.TableMangle, utiliptables.TableFilter, utiliptables.TableNAT} {
		var b bytes.Buffer
		if err := ipt.SaveInto(t, &b); err != nil {
			return "", err
		}
		out.Write(b.Bytes())
	}
	return out.String(), nil
}

// newStorage builds kube-proxy nftables' nftElementStorage (unexported) as
// newNFTElementStorage does.
func newStorage(p *kpnftables.Proxier, fieldName, containerType, containerName string) {
	s := newOf(p, fieldName)
	set(s, "elements", make(map[string]string))
	set(s, "leftoverKeys", sets.New[string]())
	set(s, "containerType", containerType)
	set(s, "containerName", containerName)
	set(p, fieldName, s)
}

// kubeProxyNFTables runs kube-proxy's nftables proxier for one family and
// returns knftables.Fake's dump of its table.
func kubeProxyNFTables(sc *Scenario, fam v1.IPFamily) (string, error) {
	nfFam := knftables.IPv4Family
	if fam == v1.IPv6Protocol {
		nfFam = knftables.IPv6Family
	}
	nft := knftables.NewFake(nfFam, "kube-proxy")
	mark := fmt.Sprintf("%#08x", 1<<sc.MasqueradeBit)
	p := &kpnftables.Proxier{}
	setBase(p, nftMakers, sc, fam)
	set(p, "needFullSync", true)
	set(p, "nftables", knftables.Interface(nft))
	set(p, "masqueradeRule", "mark set mark or "+mark)
	set(p, "nodePortAddresses", proxyutil.NewNodePortAddresses(fam, sc.NodePortAddresses))
	set(p, "staleChains", make(map[string]time.Time))
	set(p, "serviceCIDRs", strings.Join(sc.serviceCIDRs(fam), ","))
	set(p, "logRateLimiter", rate.NewLimiter(rate.Every(24*time.Hour), 1))
	for f, c := range map[string][2]string{
		"clusterIPs":               {"set", "cluster-ips"},
		"serviceIPs":               {"map", "service-ips"},
		"firewallIPs":              {"map", "firewall-ips"},
		"noEndpointServices":       {"map", "no-endpoint-services"},
		"noEndpointNodePorts":      {"map", "no-endpoint-nodeports"},
		"serviceNodePorts":         {"map", "service-nodeports"},
		"hairpinConnections":       {"set", "hairpin-connections"},
		"localhostNodePortRejects": {"map", "localhost-nodeport-reject-ports"},
	} {
		newStorage(p, f, c[0], c[1])
	}
	feed(p, sc)
	return nft.Dump(), nil
}

// addrsOf is the scenario's node addresses of one family.
func addrsOf(as []netip.Addr, fam v1.IPFamily) []netip.Addr {
	var out []netip.Addr
	for _, a := range as {
		if a.Is6() == (fam == v1.IPv6Protocol) {
			out = append(out, a)
		}
	}
	return out
}

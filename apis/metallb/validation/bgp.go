package validation

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	metallbv1beta2 "github.com/svcnet/svcnet/apis/metallb/v1beta2"
)

// Peer is MetalLB's BGPPeer webhook for one peer, with svcnet's speaker
// counted as a native (non-FRR) one: unsupported FRR-only features first,
// then the peer's own fields.
func Peer(p *metallbv1beta2.BGPPeer) error {
	if err := nativeOnly(p); err != nil {
		return err
	}
	if _, err := PeerTimers(p); err != nil {
		return fmt.Errorf("parsing peer %s %w", p.Name, err)
	}
	if err := peerFields(p); err != nil {
		return fmt.Errorf("parsing peer %s %w", p.Name, err)
	}
	return nil
}

func nativeOnly(p *metallbv1beta2.BGPPeer) error {
	s := &p.Spec
	switch {
	case s.BFDProfile != "":
		return fmt.Errorf("peer %s has bfd-profile set on native bgp mode", s.Address)
	case s.VRFName != "":
		return fmt.Errorf("peer %s has vrf set on native bgp mode", s.Address)
	case s.EnableGracefulRestart:
		return fmt.Errorf("peer %s has EnableGracefulRestart flag set on native bgp mode", s.Address)
	case s.DualStackAddressFamily:
		return fmt.Errorf("peer %s has dualstackaddressfamily flag set on native bgp mode", s.Address)
	case s.DynamicASN != "":
		return fmt.Errorf("peer %s has dynamicASN set on native bgp mode", s.Address)
	case s.Interface != "":
		return fmt.Errorf("peer %s has interface set on native bgp mode", s.Address)
	case s.LocalASN != 0:
		return fmt.Errorf("peer %s has localASN set on native bgp mode", s.Address)
	}
	return nil
}

func peerFields(p *metallbv1beta2.BGPPeer) error {
	s := &p.Spec
	switch {
	case s.MyASN == 0:
		return errors.New("missing local ASN")
	case s.ASN == 0 && s.DynamicASN == "":
		return errors.New("missing peer ASN and dynamicASN")
	case s.ASN != 0 && s.DynamicASN != "":
		return errors.New("both peer ASN and dynamicASN specified")
	case s.DynamicASN != "" && s.DynamicASN != metallbv1beta2.InternalASNMode && s.DynamicASN != metallbv1beta2.ExternalASNMode:
		return fmt.Errorf("invalid dynamicASN %s", s.DynamicASN)
	case s.ASN == s.MyASN && s.EBGPMultiHop:
		return errors.New("invalid ebgp-multihop parameter set for an ibgp peer")
	case s.Address == "" && s.Interface == "":
		return errors.New("peer has no Address or Interface specified")
	case s.Address != "" && s.Interface != "":
		return errors.New("peer has both Address and Interface specified")
	}
	if s.Address != "" {
		if _, err := netip.ParseAddr(s.Address); err != nil {
			return fmt.Errorf("invalid BGPPeer address %q", s.Address)
		}
	}
	if s.RouterID != "" {
		if _, err := netip.ParseAddr(s.RouterID); err != nil {
			return fmt.Errorf("invalid router ID %q", s.RouterID)
		}
	}
	if s.SrcAddress != "" {
		if _, err := netip.ParseAddr(s.SrcAddress); err != nil {
			return fmt.Errorf("invalid source IP %q", s.SrcAddress)
		}
	}
	if err := selectorsDuplicate(s.NodeSelectors, "nodeSelectors"); err != nil {
		return err
	}
	for i := range s.NodeSelectors {
		if _, err := metav1.LabelSelectorAsSelector(&s.NodeSelectors[i]); err != nil {
			return errors.Join(err, fmt.Errorf("failed to convert peer %s node selector", p.Name))
		}
	}
	if s.Password != "" && s.PasswordSecret.Name != "" {
		return fmt.Errorf("can not have both password and secret ref set in peer config %q/%q", p.Namespace, p.Name)
	}
	return nil
}

// Timers are a peer's effective hold and keepalive times (zero: the
// speaker's defaults, 90s and 30s).
type Timers struct {
	Hold, Keepalive time.Duration
}

// PeerTimers applies MetalLB's rules: a missing one of holdTime and
// keepaliveTime is derived from the other (hold = 3 × keepalive), the hold
// time is 0 or at least 3s, keepalive is at most hold.
func PeerTimers(p *metallbv1beta2.BGPPeer) (Timers, error) {
	ht, ka := p.Spec.HoldTime, p.Spec.KeepaliveTime
	if ht == nil && ka == nil {
		return Timers{}, nil
	}
	var t Timers
	switch {
	case ht != nil && ka != nil:
		t = Timers{ht.Duration, ka.Duration}
	case ht != nil:
		t = Timers{ht.Duration, ht.Duration / 3}
	default:
		t = Timers{ka.Duration * 3, ka.Duration}
	}
	if r := t.Hold.Truncate(time.Second); r != 0 && r < 3*time.Second {
		return Timers{}, fmt.Errorf("invalid BGPPeer timers: invalid hold time %q: must be 0 or >=3s", durString(ht))
	}
	if t.Keepalive > t.Hold {
		return Timers{}, fmt.Errorf("invalid BGPPeer timers: invalid keepaliveTime %q, must be lower than holdTime %q", durString(ka), durString(ht))
	}
	return t, nil
}

func durString(d *metav1.Duration) string {
	if d == nil {
		return "<nil>"
	}
	return d.Duration.String()
}

// Advertisement is MetalLB's BGPAdvertisement webhook: advs (existing
// ones with the new or updated one in place) are checked against the pools
// they select and the Community aliases. A community that is neither a
// value nor a known alias is not an error here (the alias may come later),
// as in MetalLB.
func Advertisement(advs []metallbv1beta1.BGPAdvertisement, pools []metallbv1beta1.IPAddressPool, communities []metallbv1beta1.Community) error {
	aliases, err := Communities(communities)
	if err != nil {
		return err
	}
	for i := range advs {
		for j := i + 1; j < len(advs); j++ {
			if advs[i].Namespace == advs[j].Namespace && equalAdvSpec(&advs[i].Spec, &advs[j].Spec) {
				return fmt.Errorf("duplicate definition of bgpadvertisements. advertisement %d and %d are equal", i+1, j+1)
			}
		}
	}
	type poolAdv struct {
		adv  *metallbv1beta1.BGPAdvertisement
		pool string
	}
	var applied []poolAdv
	for i := range advs {
		a := &advs[i]
		if err := advertisementFields(a, aliases); err != nil {
			return err
		}
		for j := range pools {
			p := &pools[j]
			if !AdvertisementSelectsPool(&a.Spec, p) {
				continue
			}
			if err := aggregationFits(a, p); err != nil {
				return err
			}
			if len(a.Spec.ServiceSelectors) == 0 {
				for _, o := range applied {
					if o.pool != p.Namespace+"/"+p.Name || len(o.adv.Spec.ServiceSelectors) > 0 {
						continue
					}
					if !localPrefCompatible(a, o.adv) {
						return fmt.Errorf("invalid local preference %d: local preferernce %d was already set for the same type of BGP update. Check existing BGP advertisements with common pools and aggregation lengths", a.Spec.LocalPref, o.adv.Spec.LocalPref)
					}
				}
			}
			applied = append(applied, poolAdv{a, p.Namespace + "/" + p.Name})
		}
	}
	return nil
}

// AggregationLengths are an advertisement's effective lengths.
func AggregationLengths(s *metallbv1beta1.BGPAdvertisementSpec) (v4, v6 int) {
	v4, v6 = 32, 128
	if s.AggregationLength != nil {
		v4 = int(*s.AggregationLength)
	}
	if s.AggregationLengthV6 != nil {
		v6 = int(*s.AggregationLengthV6)
	}
	return v4, v6
}

func advertisementFields(a *metallbv1beta1.BGPAdvertisement, aliases map[string]Community) error {
	s := &a.Spec
	if err := validateDuplicate(s.IPAddressPools, "ipAddressPools"); err != nil {
		return err
	}
	if err := validateDuplicate(s.Communities, "community"); err != nil {
		return err
	}
	if err := validateDuplicate(s.Peers, "peers"); err != nil {
		return err
	}
	for _, sel := range []struct {
		s    []metav1.LabelSelector
		name string
	}{{s.IPAddressPoolSelectors, "ipAddressPoolSelectors"}, {s.NodeSelectors, "nodeSelectors"}, {s.ServiceSelectors, "serviceSelectors"}} {
		if err := selectorsDuplicate(sel.s, sel.name); err != nil {
			return err
		}
	}
	if len(s.ServiceSelectors) > 0 {
		if s.AggregationLength != nil && *s.AggregationLength != 32 {
			return fmt.Errorf("serviceSelectors and aggregationLength are mutually exclusive, both cannot be set in %s", a.Name)
		}
		if s.AggregationLengthV6 != nil && *s.AggregationLengthV6 != 128 {
			return fmt.Errorf("serviceSelectors and aggregationLengthV6 are mutually exclusive, both cannot be set in %s", a.Name)
		}
	}
	v4, v6 := AggregationLengths(s)
	if v4 > 32 {
		return fmt.Errorf("invalid aggregation length %d for IPv4", v4)
	}
	if v6 > 128 {
		return fmt.Errorf("invalid aggregation length %d for IPv6", v6)
	}
	for _, c := range s.Communities {
		if _, err := ResolveCommunity(c, aliases); err != nil && !errors.Is(err, ErrInvalidCommunityFormat) {
			return errors.Join(err, fmt.Errorf("invalid community %q in BGP advertisement", c))
		}
	}
	return selectorsParse(a.Name, s.NodeSelectors, s.ServiceSelectors, s.IPAddressPoolSelectors)
}

// selectorsParse checks that an advertisement's node, service and pool
// selectors parse, in that order, with MetalLB's messages for each kind.
func selectorsParse(name string, nodeSels, serviceSels, poolSels []metav1.LabelSelector) error {
	for i := range nodeSels {
		if _, err := metav1.LabelSelectorAsSelector(&nodeSels[i]); err != nil {
			return errors.Join(errors.Join(err, fmt.Errorf("invalid label selector %v", nodeSels[i])),
				fmt.Errorf("failed to parse node selector for %s", name))
		}
	}
	for i := range serviceSels {
		if _, err := metav1.LabelSelectorAsSelector(&serviceSels[i]); err != nil {
			return errors.Join(fmt.Errorf("invalid service selector %v: %w", serviceSels[i], err),
				fmt.Errorf("failed to parse service selector for %s", name))
		}
	}
	for i := range poolSels {
		if _, err := metav1.LabelSelectorAsSelector(&poolSels[i]); err != nil {
			return errors.Join(err, fmt.Errorf("invalid label selector %v", poolSels[i]))
		}
	}
	return nil
}

// AdvertisementSelectsPool reports whether the advertisement applies to
// the pool: by name, by label selector, or (neither given) to every pool.
// Advertisements and pools match within one namespace.
func AdvertisementSelectsPool(s *metallbv1beta1.BGPAdvertisementSpec, p *metallbv1beta1.IPAddressPool) bool {
	if len(s.IPAddressPools) == 0 && len(s.IPAddressPoolSelectors) == 0 {
		return true
	}
	if slices.Contains(s.IPAddressPools, p.Name) {
		return true
	}
	for i := range s.IPAddressPoolSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&s.IPAddressPoolSelectors[i])
		if err == nil && sel.Matches(labelSet(p.Labels)) {
			return true
		}
	}
	return false
}

type labelSet map[string]string

func (l labelSet) Has(k string) bool              { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string            { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }

// aggregationFits refuses an aggregation length longer than a pool
// entry's shortest CIDR (the routes would be more specific than the pool).
func aggregationFits(a *metallbv1beta1.BGPAdvertisement, p *metallbv1beta1.IPAddressPool) error {
	cidrs, err := PoolCIDRs(p)
	if err != nil {
		return nil // the pool's own webhook reports it
	}
	v4, v6 := AggregationLengths(&a.Spec)
	for i, entry := range cidrs {
		if len(entry) == 0 {
			continue
		}
		max := v4
		if entry[0].Addr().Is6() {
			max = v6
		}
		lowest := entry[0].Bits()
		for _, c := range entry {
			lowest = min(lowest, c.Bits())
		}
		if max < lowest {
			return fmt.Errorf("invalid aggregation length %d: prefix %d in this pool is more specific than the aggregation length for addresses %s", v4, lowest, p.Spec.Addresses[i])
		}
	}
	return nil
}

// localPrefCompatible: two advertisements of one pool may differ in
// local preference only if they cannot produce the same route (different
// aggregation lengths in both families).
func localPrefCompatible(a, b *metallbv1beta1.BGPAdvertisement) bool {
	if a.Spec.LocalPref == b.Spec.LocalPref {
		return true
	}
	a4, a6 := AggregationLengths(&a.Spec)
	b4, b6 := AggregationLengths(&b.Spec)
	return a4 != b4 && a6 != b6
}

func equalAdvSpec(a, b *metallbv1beta1.BGPAdvertisementSpec) bool {
	ja, _ := jsonOf(a)
	jb, _ := jsonOf(b)
	return ja == jb
}

// selectorsDuplicate is MetalLB's check that no selector is given twice
// and that no selector repeats a match expression or one of its values.
// Values are compared sorted, and the messages print the selectors as Go
// values (%q), as MetalLB does.
func selectorsDuplicate(in []metav1.LabelSelector, what string) error {
	sels := make([]metav1.LabelSelector, len(in))
	for i := range in {
		in[i].DeepCopyInto(&sels[i])
		for _, me := range sels[i].MatchExpressions {
			sort.Strings(me.Values)
		}
	}
	for i := range sels {
		mes := sels[i].MatchExpressions
		for x := range mes {
			if err := validateDuplicate(mes[x].Values, "match expression value in label selector"); err != nil {
				return err
			}
			for y := x + 1; y < len(mes); y++ {
				if mes[x].String() == mes[y].String() {
					return fmt.Errorf("duplicate definition of %s %q", "match expressions", mes[x])
				}
			}
		}
		for j := i + 1; j < len(sels); j++ {
			if sels[i].String() == sels[j].String() {
				return fmt.Errorf("duplicate definition of %s %q", what, sels[i])
			}
		}
	}
	return nil
}

// L2Advertisement is MetalLB's L2Advertisement webhook for one
// advertisement, in MetalLB's order: no pool named twice, no selector
// given twice (ipAddressPoolSelectors, nodeSelectors, serviceSelectors),
// then node selectors, service selectors, preferred node selectors and
// pool selectors that parse. Weights (1 to 100) are the schema's
// (SchemaL2Advertisement), not the webhook's.
func L2Advertisement(a *metallbv1beta1.L2Advertisement) error {
	s := &a.Spec
	if err := validateDuplicate(s.IPAddressPools, "ipAddressPools"); err != nil {
		return err
	}
	for _, sel := range []struct {
		s    []metav1.LabelSelector
		name string
	}{{s.IPAddressPoolSelectors, "ipAddressPoolSelectors"}, {s.NodeSelectors, "nodeSelectors"}, {s.ServiceSelectors, "serviceSelectors"}} {
		if err := selectorsDuplicate(sel.s, sel.name); err != nil {
			return err
		}
	}
	if err := selectorsParse(a.Name, s.NodeSelectors, s.ServiceSelectors, nil); err != nil {
		return err
	}
	for i := range s.PreferredNodeSelectors {
		p := s.PreferredNodeSelectors[i].Preference
		if _, err := metav1.LabelSelectorAsSelector(&p); err != nil {
			return errors.Join(errors.Join(err, fmt.Errorf("invalid preferred node selector %v", p)),
				fmt.Errorf("failed to parse preferred node selectors for %s", a.Name))
		}
	}
	return selectorsParse(a.Name, nil, nil, s.IPAddressPoolSelectors)
}

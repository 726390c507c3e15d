package validation

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	metallbv1beta2 "github.com/svcnet/svcnet/apis/metallb/v1beta2"
)

func TestParseAddresses(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		err  string
	}{
		{in: "192.168.4.10-192.168.4.20", want: "192.168.4.10/31 192.168.4.12/30 192.168.4.16/30 192.168.4.20/32"},
		{in: "10.0.0.5/24", want: "10.0.0.0/24"},
		{in: "10.0.0.0-10.0.0.255", want: "10.0.0.0/24"},
		{in: "10.0.0.7-10.0.0.7", want: "10.0.0.7/32"},
		{in: "fd00::1-fd00::2", want: "fd00::1/128 fd00::2/128"},
		{in: "0.0.0.0-255.255.255.255", want: "0.0.0.0/0"},
		{in: "not-an-ip", err: `invalid IP range "not-an-ip": invalid start IP "not"`},
		{in: "1.2.3.4", err: `invalid CIDR "1.2.3.4"`},
		{in: "10.0.0.9-10.0.0.1", err: `invalid IP range "10.0.0.9-10.0.0.1": start IP "10.0.0.9" is after the end IP "10.0.0.1"`},
		{in: "10.0.0.1-10.0.0.x", err: `invalid IP range "10.0.0.1-10.0.0.x": invalid end IP "10.0.0.x"`},
	} {
		got, err := ParseAddresses(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: error %v, want %s", tc.in, err, tc.err)
			}
			continue
		}
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		if err != nil || strings.Join(s, " ") != tc.want {
			t.Errorf("%s: %v %v, want %s", tc.in, s, err, tc.want)
		}
	}
}

// TestSummarizeCoversExactly checks the summarization against a count of
// addresses on many ranges: every address of the range, none outside.
func TestSummarizeCoversExactly(t *testing.T) {
	base := netip.MustParseAddr("10.1.0.0")
	for lo := 0; lo < 40; lo += 3 {
		for hi := lo; hi < 300; hi += 7 {
			start, end := base, base
			for range lo {
				start = start.Next()
			}
			for range hi {
				end = end.Next()
			}
			ps := summarize(start, end)
			n := 0
			for _, p := range ps {
				n += 1 << (32 - p.Bits())
				if !p.Contains(start) && p.Addr().Compare(start) < 0 || lastAddr(p).Compare(end) > 0 {
					t.Fatalf("%v-%v: %v outside", start, end, p)
				}
			}
			if n != hi-lo+1 {
				t.Fatalf("%v-%v: %d addresses in %v", start, end, n, ps)
			}
		}
	}
}

func pool(ns, name string, addrs ...string) metallbv1beta1.IPAddressPool {
	return metallbv1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: metallbv1beta1.IPAddressPoolSpec{Addresses: addrs}}
}

func TestPools(t *testing.T) {
	first := pool("metallb-system", "first", "172.18.255.200-172.18.255.250")
	for _, tc := range []struct {
		name  string
		pools []metallbv1beta1.IPAddressPool
		err   string
	}{
		{"disjoint", []metallbv1beta1.IPAddressPool{first, pool("metallb-system", "b", "172.18.0.0/24")}, ""},
		{"overlap", []metallbv1beta1.IPAddressPool{first, pool("metallb-system", "second", "172.18.255.240/28")},
			`CIDR "172.18.255.240/28" in pool "second" overlaps with already defined CIDR "172.18.255.240/29"`},
		{"invalid range", []metallbv1beta1.IPAddressPool{pool("metallb-system", "bad", "192.168.4.20-192.168.4.10")},
			`parsing address pool bad: invalid CIDR "192.168.4.20-192.168.4.10" in pool "bad": invalid IP range "192.168.4.20-192.168.4.10": start IP "192.168.4.20" is after the end IP "192.168.4.10"`},
		{"no addresses", []metallbv1beta1.IPAddressPool{pool("metallb-system", "empty")}, `parsing address pool empty: pool has no prefixes defined`},
		{"same pool twice", []metallbv1beta1.IPAddressPool{pool("metallb-system", "a", "10.0.0.0/24", "10.0.0.128/25")},
			`CIDR "10.0.0.128/25" in pool "a" overlaps with already defined CIDR "10.0.0.0/24"`},
	} {
		err := Pools(tc.pools)
		if (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}

func peer(mutate func(*metallbv1beta2.BGPPeerSpec)) *metallbv1beta2.BGPPeer {
	p := &metallbv1beta2.BGPPeer{ObjectMeta: metav1.ObjectMeta{Namespace: "metallb-system", Name: "router"},
		Spec: metallbv1beta2.BGPPeerSpec{MyASN: 64512, ASN: 64513, Address: "172.18.0.100"}}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

func TestPeer(t *testing.T) {
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	for _, tc := range []struct {
		name   string
		mutate func(*metallbv1beta2.BGPPeerSpec)
		err    string
	}{
		{"valid", nil, ""},
		{"missing local ASN", func(s *metallbv1beta2.BGPPeerSpec) { s.MyASN = 0 }, "parsing peer router missing local ASN"},
		{"missing peer ASN", func(s *metallbv1beta2.BGPPeerSpec) { s.ASN = 0 }, "parsing peer router missing peer ASN and dynamicASN"},
		{"ibgp multihop", func(s *metallbv1beta2.BGPPeerSpec) { s.ASN = 64512; s.EBGPMultiHop = true }, "parsing peer router invalid ebgp-multihop parameter set for an ibgp peer"},
		{"bad address", func(s *metallbv1beta2.BGPPeerSpec) { s.Address = "router.example" }, `parsing peer router invalid BGPPeer address "router.example"`},
		{"no address", func(s *metallbv1beta2.BGPPeerSpec) { s.Address = "" }, "parsing peer router peer has no Address or Interface specified"},
		{"bad source", func(s *metallbv1beta2.BGPPeerSpec) { s.SrcAddress = "x" }, `parsing peer router invalid source IP "x"`},
		{"short hold time", func(s *metallbv1beta2.BGPPeerSpec) { s.HoldTime = dur(time.Second) }, `parsing peer router invalid BGPPeer timers: invalid hold time "1s": must be 0 or >=3s`},
		{"keepalive above hold", func(s *metallbv1beta2.BGPPeerSpec) {
			s.HoldTime = dur(9 * time.Second)
			s.KeepaliveTime = dur(10 * time.Second)
		},
			`parsing peer router invalid BGPPeer timers: invalid keepaliveTime "10s", must be lower than holdTime "9s"`},
		{"bfd", func(s *metallbv1beta2.BGPPeerSpec) { s.BFDProfile = "fast" }, "peer 172.18.0.100 has bfd-profile set on native bgp mode"},
		{"password and secret", func(s *metallbv1beta2.BGPPeerSpec) { s.Password = "a"; s.PasswordSecret.Name = "s" },
			`parsing peer router can not have both password and secret ref set in peer config "metallb-system"/"router"`},
	} {
		err := Peer(peer(tc.mutate))
		if (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
	if tm, err := PeerTimers(peer(func(s *metallbv1beta2.BGPPeerSpec) { s.HoldTime = dur(9 * time.Second) })); err != nil || tm != (Timers{9 * time.Second, 3 * time.Second}) {
		t.Errorf("timers from hold time: %v %v", tm, err)
	}
}

func TestCommunities(t *testing.T) {
	c, err := ParseCommunity("65535:65282")
	if err != nil || c.Value != 0xffffff02 || c.String() != "65535:65282" {
		t.Errorf("standard: %+v %v", c, err)
	}
	c, err = ParseCommunity("large:1:2:3")
	if err != nil || !c.Large || c.Global != 1 || c.Local2 != 3 || c.String() != "large:1:2:3" {
		t.Errorf("large: %+v %v", c, err)
	}
	if _, err := ParseCommunity("65536:1"); !errors.Is(err, ErrInvalidCommunityValue) ||
		err.Error() != `invalid community value: invalid section "65536" of community "65536:1", err: "strconv.ParseUint: parsing \"65536\": value out of range"` {
		t.Errorf("out of range: %v", err)
	}
	if _, err := ParseCommunity("no-export"); !errors.Is(err, ErrInvalidCommunityFormat) {
		t.Errorf("alias-like: %v", err)
	}
	cs := []metallbv1beta1.Community{
		{Spec: metallbv1beta1.CommunitySpec{Communities: []metallbv1beta1.CommunityAlias{{Name: "no-advertise", Value: "65535:65282"}}}},
		{Spec: metallbv1beta1.CommunitySpec{Communities: []metallbv1beta1.CommunityAlias{{Name: "no-advertise", Value: "65535:65281"}}}},
	}
	if _, err := Communities(cs); err == nil || err.Error() != `duplicate definition of community "no-advertise"` {
		t.Errorf("duplicate alias: %v", err)
	}
	cs[1].Spec.Communities[0] = metallbv1beta1.CommunityAlias{Name: "bad", Value: "extended:1:2:3"}
	if _, err := Communities(cs); err == nil || !strings.HasPrefix(err.Error(), `parsing community "bad": invalid community value: invalid marker for large community`) {
		t.Errorf("bad alias value: %v", err)
	}
}

func adv(name string, mutate func(*metallbv1beta1.BGPAdvertisementSpec)) metallbv1beta1.BGPAdvertisement {
	a := metallbv1beta1.BGPAdvertisement{ObjectMeta: metav1.ObjectMeta{Namespace: "metallb-system", Name: name}}
	if mutate != nil {
		mutate(&a.Spec)
	}
	return a
}

func TestAdvertisement(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	pools := []metallbv1beta1.IPAddressPool{pool("metallb-system", "first", "172.18.255.200-172.18.255.250"), pool("metallb-system", "wide", "10.9.0.0/16")}
	comms := []metallbv1beta1.Community{{Spec: metallbv1beta1.CommunitySpec{Communities: []metallbv1beta1.CommunityAlias{{Name: "no-advertise", Value: "65535:65282"}}}}}
	for _, tc := range []struct {
		name string
		advs []metallbv1beta1.BGPAdvertisement
		err  string
	}{
		{"valid", []metallbv1beta1.BGPAdvertisement{adv("a", func(s *metallbv1beta1.BGPAdvertisementSpec) {
			s.Communities = []string{"no-advertise", "64512:1", "large:1:2:3", "later-alias"}
			s.LocalPref = 100
		})}, ""},
		{"bad community", []metallbv1beta1.BGPAdvertisement{adv("a", func(s *metallbv1beta1.BGPAdvertisementSpec) { s.Communities = []string{"1:99999"} })},
			"invalid community value: invalid section \"99999\" of community \"1:99999\", err: \"strconv.ParseUint: parsing \\\"99999\\\": value out of range\"\ninvalid community \"1:99999\" in BGP advertisement"},
		{"aggregation above 32", []metallbv1beta1.BGPAdvertisement{adv("a", func(s *metallbv1beta1.BGPAdvertisementSpec) { s.AggregationLength = i32(33) })},
			`invalid aggregation length 33 for IPv4`},
		{"IPv6 aggregation above 128", []metallbv1beta1.BGPAdvertisement{adv("a", func(s *metallbv1beta1.BGPAdvertisementSpec) { s.AggregationLengthV6 = i32(129) })},
			`invalid aggregation length 129 for IPv6`},
		{"bad node selector", []metallbv1beta1.BGPAdvertisement{adv("a", func(s *metallbv1beta1.BGPAdvertisementSpec) {
			s.NodeSelectors = []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: "Near"}}}}
		})}, "\"Near\" is not a valid label selector operator\ninvalid label selector {map[] [{zone Near []}]}\nfailed to parse node selector for a"},
		{"bad service selector", []metallbv1beta1.BGPAdvertisement{adv("a", func(s *metallbv1beta1.BGPAdvertisementSpec) {
			s.ServiceSelectors = []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "In"}}}}
		})}, "invalid service selector {map[] [{app In []}]}: values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty\nfailed to parse service selector for a"},
		{"duplicate service selector", []metallbv1beta1.BGPAdvertisement{adv("a", func(s *metallbv1beta1.BGPAdvertisementSpec) {
			s.ServiceSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "web"}}, {MatchLabels: map[string]string{"app": "web"}}}
		})}, `duplicate definition of serviceSelectors {map["app":"web"] []}`},
		{"aggregation shorter than pool", []metallbv1beta1.BGPAdvertisement{adv("a", func(s *metallbv1beta1.BGPAdvertisementSpec) {
			s.IPAddressPools = []string{"wide"}
			s.AggregationLength = i32(8)
		})}, `invalid aggregation length 8: prefix 16 in this pool is more specific than the aggregation length for addresses 10.9.0.0/16`},
		{"aggregation 24 over a range", []metallbv1beta1.BGPAdvertisement{adv("a", func(s *metallbv1beta1.BGPAdvertisementSpec) {
			s.IPAddressPools = []string{"first"}
			s.AggregationLength = i32(24)
		})}, `invalid aggregation length 24: prefix 28 in this pool is more specific than the aggregation length for addresses 172.18.255.200-172.18.255.250`},
		{"aggregation 28 over a range", []metallbv1beta1.BGPAdvertisement{adv("a", func(s *metallbv1beta1.BGPAdvertisementSpec) {
			s.IPAddressPools = []string{"first"}
			s.AggregationLength = i32(28)
		})}, ""},
		{"local pref conflict", []metallbv1beta1.BGPAdvertisement{
			adv("a", func(s *metallbv1beta1.BGPAdvertisementSpec) { s.LocalPref = 100 }),
			adv("b", func(s *metallbv1beta1.BGPAdvertisementSpec) { s.LocalPref = 200 }),
		}, "invalid local preference 200: local preferernce 100 was already set for the same type of BGP update. Check existing BGP advertisements with common pools and aggregation lengths"},
		{"duplicate", []metallbv1beta1.BGPAdvertisement{adv("a", nil), adv("b", nil)}, "duplicate definition of bgpadvertisements. advertisement 1 and 2 are equal"},
		{"service selectors and aggregation", []metallbv1beta1.BGPAdvertisement{adv("a", func(s *metallbv1beta1.BGPAdvertisementSpec) {
			s.ServiceSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"a": "b"}}}
			s.AggregationLength = i32(24)
		})}, "serviceSelectors and aggregationLength are mutually exclusive, both cannot be set in a"},
	} {
		err := Advertisement(tc.advs, pools, comms)
		if (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}

func TestSchemaBGPPeer(t *testing.T) {
	parse := func(y string) map[string]any {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
			t.Fatal(err)
		}
		return u.Object
	}
	for _, tc := range []struct {
		yaml string
		want []string
	}{
		{"spec: {myASN: 64512, peerASN: 64513, peerAddress: 10.0.0.1}", nil},
		{"spec: {myASN: 4294967296, peerASN: 1}", []string{"spec.myASN: Invalid value: 4294967296: spec.myASN in body should be less than or equal to 4294967295"}},
		{"spec: {myASN: -1, peerASN: 1}", []string{"spec.myASN: Invalid value: -1: spec.myASN in body should be greater than or equal to 0"}},
		{"spec: {myASN: abc, peerASN: 1}", []string{`spec.myASN: Invalid value: "string": spec.myASN in body must be of type integer: "string"`}},
		{"spec: {peerASN: 1}", []string{"spec.myASN: Required value"}},
		{"spec: {myASN: 1, peerASN: 1, peerPort: 20000}", []string{"spec.peerPort: Invalid value: 20000: spec.peerPort in body should be less than or equal to 16384"}},
		{"spec: {myASN: 1, dynamicASN: both}", []string{`spec.dynamicASN: Unsupported value: "both": supported values: "internal", "external"`}},
	} {
		var got []string
		for _, e := range SchemaBGPPeer(parse(tc.yaml)) {
			got = append(got, e.Error())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.yaml, got, tc.want)
		}
	}
	m := parse("spec: {myASN: 1}")
	DefaultBGPPeer(m)
	if m["spec"].(map[string]any)["peerPort"] != int64(179) {
		t.Errorf("peerPort default: %v", m)
	}
}

func l2adv(mutate func(*metallbv1beta1.L2AdvertisementSpec)) *metallbv1beta1.L2Advertisement {
	a := &metallbv1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: "metallb-system", Name: "l2"}}
	if mutate != nil {
		mutate(&a.Spec)
	}
	return a
}

// TestL2Advertisement: MetalLB 0.16.2's webhook checks of an
// L2Advertisement's selectors, serviceSelectors and preferredNodeSelectors
// included, with its messages.
func TestL2Advertisement(t *testing.T) {
	sel := func(k, v string) metav1.LabelSelector {
		return metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	badOp := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: "Near", Values: []string{"a"}}}}
	noValues := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "In"}}}
	for _, tc := range []struct {
		name   string
		mutate func(*metallbv1beta1.L2AdvertisementSpec)
		err    string
	}{
		{"empty", nil, ""},
		{"valid selectors and preferences", func(s *metallbv1beta1.L2AdvertisementSpec) {
			s.NodeSelectors = []metav1.LabelSelector{sel("zone", "a")}
			s.ServiceSelectors = []metav1.LabelSelector{sel("app", "web"), sel("app", "api")}
			s.PreferredNodeSelectors = []metallbv1beta1.PreferredNodeSelector{{Weight: 100, Preference: sel("rack", "1")}, {Weight: 1}}
		}, ""},
		{"weight out of range is the schema's business", func(s *metallbv1beta1.L2AdvertisementSpec) {
			s.PreferredNodeSelectors = []metallbv1beta1.PreferredNodeSelector{{Weight: 0}, {Weight: 500}}
		}, ""},
		{"duplicate pool", func(s *metallbv1beta1.L2AdvertisementSpec) { s.IPAddressPools = []string{"p", "p"} },
			`duplicate definition of ipAddressPools "p"`},
		{"duplicate service selector", func(s *metallbv1beta1.L2AdvertisementSpec) {
			s.ServiceSelectors = []metav1.LabelSelector{sel("app", "web"), sel("app", "web")}
		}, `duplicate definition of serviceSelectors {map["app":"web"] []}`},
		{"duplicate selector up to value order", func(s *metallbv1beta1.L2AdvertisementSpec) {
			s.ServiceSelectors = []metav1.LabelSelector{
				{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "In", Values: []string{"web", "api"}}}},
				{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "In", Values: []string{"api", "web"}}}},
			}
		}, `duplicate definition of serviceSelectors {map[] [{"app" "In" ["api" "web"]}]}`},
		{"duplicate match expression", func(s *metallbv1beta1.L2AdvertisementSpec) {
			r := metav1.LabelSelectorRequirement{Key: "app", Operator: "Exists"}
			s.ServiceSelectors = []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{r, r}}}
		}, `duplicate definition of match expressions {"app" "Exists" []}`},
		{"duplicate node selector before service selectors", func(s *metallbv1beta1.L2AdvertisementSpec) {
			s.NodeSelectors = []metav1.LabelSelector{sel("zone", "a"), sel("zone", "a")}
			s.ServiceSelectors = []metav1.LabelSelector{sel("app", "web"), sel("app", "web")}
		}, `duplicate definition of nodeSelectors {map["zone":"a"] []}`},
		{"bad node selector", func(s *metallbv1beta1.L2AdvertisementSpec) { s.NodeSelectors = []metav1.LabelSelector{badOp} },
			"\"Near\" is not a valid label selector operator\ninvalid label selector {map[] [{zone Near [a]}]}\nfailed to parse node selector for l2"},
		{"bad service selector", func(s *metallbv1beta1.L2AdvertisementSpec) { s.ServiceSelectors = []metav1.LabelSelector{noValues} },
			"invalid service selector {map[] [{app In []}]}: values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty\nfailed to parse service selector for l2"},
		{"bad service label key", func(s *metallbv1beta1.L2AdvertisementSpec) {
			s.ServiceSelectors = []metav1.LabelSelector{sel("no spaces", "x")}
		}, "invalid service selector {map[no spaces:x] []}: key: Invalid value: \"no spaces\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')\nfailed to parse service selector for l2"},
		{"bad preferred node selector", func(s *metallbv1beta1.L2AdvertisementSpec) {
			s.PreferredNodeSelectors = []metallbv1beta1.PreferredNodeSelector{{Weight: 10, Preference: badOp}}
		}, "\"Near\" is not a valid label selector operator\ninvalid preferred node selector {map[] [{zone Near [a]}]}\nfailed to parse preferred node selectors for l2"},
		{"bad service selector reported before bad preference", func(s *metallbv1beta1.L2AdvertisementSpec) {
			s.ServiceSelectors = []metav1.LabelSelector{noValues}
			s.PreferredNodeSelectors = []metallbv1beta1.PreferredNodeSelector{{Weight: 10, Preference: badOp}}
		}, "invalid service selector {map[] [{app In []}]}: values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty\nfailed to parse service selector for l2"},
		{"bad pool selector", func(s *metallbv1beta1.L2AdvertisementSpec) { s.IPAddressPoolSelectors = []metav1.LabelSelector{badOp} },
			"\"Near\" is not a valid label selector operator\ninvalid label selector {map[] [{zone Near [a]}]}"},
	} {
		err := L2Advertisement(l2adv(tc.mutate))
		if (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}

func TestSchemaL2Advertisement(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want []string
	}{
		{"spec: {}", nil},
		{"spec: {ipAddressPools: [a]}", nil},
		{"spec: {preferredNodeSelectors: [{weight: 1, preference: {}}, {weight: 100, preference: {matchLabels: {a: b}}}]}", nil},
		{"spec: {preferredNodeSelectors: [{weight: 0, preference: {}}]}",
			[]string{"spec.preferredNodeSelectors[0].weight: Invalid value: 0: spec.preferredNodeSelectors[0].weight in body should be greater than or equal to 1"}},
		{"spec: {preferredNodeSelectors: [{weight: 50, preference: {}}, {weight: 101, preference: {}}]}",
			[]string{"spec.preferredNodeSelectors[1].weight: Invalid value: 101: spec.preferredNodeSelectors[1].weight in body should be less than or equal to 100"}},
		{"spec: {preferredNodeSelectors: [{weight: '5', preference: {}}]}",
			[]string{`spec.preferredNodeSelectors[0].weight: Invalid value: "string": spec.preferredNodeSelectors[0].weight in body must be of type integer: "string"`}},
		{"spec: {preferredNodeSelectors: [{preference: {}}]}", []string{"spec.preferredNodeSelectors[0].weight: Required value"}},
		{"spec: {preferredNodeSelectors: [{weight: 5}]}", []string{"spec.preferredNodeSelectors[0].preference: Required value"}},
		{"spec: {preferredNodeSelectors: [{weight: null, preference: null}]}",
			[]string{"spec.preferredNodeSelectors[0].weight: Required value", "spec.preferredNodeSelectors[0].preference: Required value"}},
		{"spec: {preferredNodeSelectors: [{weight: 5, preference: zone}]}",
			[]string{`spec.preferredNodeSelectors[0].preference: Invalid value: "string": spec.preferredNodeSelectors[0].preference in body must be of type object: "string"`}},
		{"spec: {preferredNodeSelectors: {weight: 5}}",
			[]string{`spec.preferredNodeSelectors: Invalid value: "object": spec.preferredNodeSelectors in body must be of type array: "object"`}},
	} {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(tc.yaml), &u.Object); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range SchemaL2Advertisement(u.Object) {
			got = append(got, e.Error())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.yaml, got, tc.want)
		}
	}
}

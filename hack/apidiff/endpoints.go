package main

import (
	"math/rand"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericrest "k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/apis/discovery"
	k8sendpoint "k8s.io/kubernetes/pkg/registry/core/endpoint"
	k8sslice "k8s.io/kubernetes/pkg/registry/discovery/endpointslice"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/endpoints"
	"github.com/svcnet/svcnet/registry/endpointslice"
)

var addrPool = []string{"10.0.0.1", "10.0.0.2", "10.0.0.1", "010.0.0.1", "bad", "", "127.0.0.1", "169.254.1.1", "224.0.0.1",
	"fe80::1", "::1", "2001:db8::1", "0.0.0.0", "::", "::ffff:10.0.0.1", "10.0.0.1/24", "web.example.com", "Web_Host"}

func randObjectName(r *rand.Rand) string {
	return pick(r, "web", "web", "web-abc", "1web", "web.x", "Web", strings.Repeat("a", 254), "w_b", "..")
}

func randEndpointAddress(r *rand.Rand) corev1.EndpointAddress {
	a := corev1.EndpointAddress{IP: pick(r, addrPool...)}
	if maybe(r, 0.3) {
		a.Hostname = pick(r, "web-0", "Bad_Host", strings.Repeat("h", 64))
	}
	if maybe(r, 0.3) {
		a.NodeName = pick(r, ptr("node-1"), ptr("Bad_Node"), ptr(""))
	}
	if maybe(r, 0.3) {
		a.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: pick(r, "web-0", "")}
	}
	return a
}

func randEndpointPort(r *rand.Rand) corev1.EndpointPort {
	return corev1.EndpointPort{
		Name:        pick(r, "", "http", "http", "HTTP", "a_b"),
		Port:        pick[int32](r, 80, 8080, 0, 65536),
		Protocol:    pick(r, corev1.Protocol(""), corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP, "ICMP"),
		AppProtocol: pick(r, nil, ptr("http"), ptr("bad proto")),
	}
}

func randSubset(r *rand.Rand) corev1.EndpointSubset {
	var s corev1.EndpointSubset
	for i, n := 0, r.Intn(3); i < n; i++ {
		s.Addresses = append(s.Addresses, randEndpointAddress(r))
	}
	for i, n := 0, r.Intn(2); i < n; i++ {
		s.NotReadyAddresses = append(s.NotReadyAddresses, randEndpointAddress(r))
	}
	for i, n := 0, r.Intn(3); i < n; i++ {
		s.Ports = append(s.Ports, randEndpointPort(r))
	}
	return s
}

func randEndpoints(r *rand.Rand) *corev1.Endpoints {
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace}}
	if maybe(r, 0.2) {
		ep.Name = randObjectName(r)
	}
	if maybe(r, 0.1) {
		ep.Labels = map[string]string{"bad key!": "x"}
	}
	for i, n := 0, r.Intn(3); i < n; i++ {
		ep.Subsets = append(ep.Subsets, randSubset(r))
	}
	return ep
}

func validEndpoints() *corev1.Endpoints {
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace, UID: "uid-2", ResourceVersion: "7"},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.2", NodeName: ptr("node-1")}},
			Ports:     []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}},
		}},
	}
}

func endpointsCreateCase(r *rand.Rand) string {
	in := randEndpoints(r)
	ctx := requestCtx("create", "", "v1", "endpoints", "", in.Name)

	kv := in.DeepCopy()
	legacyscheme.Scheme.Default(kv)
	kDefaulted := kv.DeepCopy()
	ki := &api.Endpoints{}
	toInternal(kv, ki)
	k8sendpoint.Strategy.PrepareForCreate(ctx, ki)
	kErrs := genericrest.ValidateCreate(ctx, ki, k8sendpoint.Strategy)

	st := endpoints.NewStrategy()
	sv := in.DeepCopy()
	st.Default(sv)
	sDefaulted := sv.DeepCopy()
	st.PrepareForCreate(ctx, sv)
	sErrs := registry.ValidateCreate(ctx, st, true, sv)
	warnDiff := ""
	if len(kErrs) == 0 && len(sErrs) == 0 {
		warnDiff = compareWarnings("create", k8sendpoint.Strategy.WarningsOnCreate(ctx, ki), createWarnings(ctx, st, sv))
	}
	return withInput(joinDiffs(compareObjs("defaulted", kDefaulted, sDefaulted), compareErrs("create", kErrs, sErrs), warnDiff), in)
}

func endpointsUpdateCase(r *rand.Rand) string {
	old := validEndpoints()
	if maybe(r, 0.2) {
		// Stored before strict IP validation: a leading-zero address.
		old.Subsets[0].Addresses[0].IP = "010.0.0.1"
	}
	in := old.DeepCopy()
	switch r.Intn(4) {
	case 0:
		in.Subsets = append(in.Subsets, randSubset(r))
	case 1:
		in.Subsets[0].Addresses = append(in.Subsets[0].Addresses, randEndpointAddress(r))
	case 2:
		in.Subsets[0].Ports[0] = randEndpointPort(r)
	case 3:
		in.Name = randObjectName(r)
		in.Labels = map[string]string{"app": pick(r, "web", "bad value!")}
	}
	ctx := requestCtx("update", "", "v1", "endpoints", "", in.Name)

	kv := in.DeepCopy()
	legacyscheme.Scheme.Default(kv)
	kDefaulted := kv.DeepCopy()
	ki, kold := &api.Endpoints{}, &api.Endpoints{}
	toInternal(kv, ki)
	toInternal(old.DeepCopy(), kold)
	k8sendpoint.Strategy.PrepareForUpdate(ctx, ki, kold)
	kErrs := genericrest.ValidateUpdate(ctx, ki, kold, k8sendpoint.Strategy)

	st := endpoints.NewStrategy()
	sv := in.DeepCopy()
	st.Default(sv)
	sDefaulted := sv.DeepCopy()
	st.PrepareForUpdate(ctx, sv, old.DeepCopy())
	sErrs := registry.ValidateUpdate(ctx, st, true, sv, old.DeepCopy())
	warnDiff := ""
	if len(kErrs) == 0 && len(sErrs) == 0 {
		warnDiff = compareWarnings("update", k8sendpoint.Strategy.WarningsOnUpdate(ctx, ki, kold), updateWarnings(ctx, st, sv, old))
	}
	return withInput(joinDiffs(compareObjs("defaulted", kDefaulted, sDefaulted), compareErrs("update", kErrs, sErrs), warnDiff), in, old)
}

func randSliceEndpoint(r *rand.Rand) discoveryv1.Endpoint {
	var e discoveryv1.Endpoint
	n := pick(r, 1, 1, 1, 0, 2)
	if maybe(r, 0.01) {
		n = 101
	}
	for i := 0; i < n; i++ {
		e.Addresses = append(e.Addresses, pick(r, addrPool...))
	}
	if maybe(r, 0.3) {
		e.Conditions = discoveryv1.EndpointConditions{Ready: ptr(maybe(r, 0.5)), Serving: pick(r, nil, ptr(true)), Terminating: pick(r, nil, ptr(false))}
	}
	if maybe(r, 0.2) {
		e.Hostname = pick(r, ptr("web-0"), ptr("Bad_Host"), ptr(""))
	}
	if maybe(r, 0.3) {
		e.NodeName = pick(r, ptr("node-1"), ptr("Bad_Node"), ptr(""))
	}
	if maybe(r, 0.2) {
		e.Zone = pick(r, ptr("zone-a"), ptr("bad zone!"), ptr(""))
	}
	if maybe(r, 0.2) {
		h := &discoveryv1.EndpointHints{}
		for i, n := 0, r.Intn(3); i < n; i++ {
			h.ForZones = append(h.ForZones, discoveryv1.ForZone{Name: pick(r, "zone-a", "zone-a", "bad zone!", "")})
		}
		for i, n := 0, r.Intn(3); i < n; i++ {
			h.ForNodes = append(h.ForNodes, discoveryv1.ForNode{Name: pick(r, "node-1", "node-1", "Node_1", "")})
		}
		e.Hints = h
	}
	if maybe(r, 0.1) {
		e.DeprecatedTopology = map[string]string{pick(r, "topology.kubernetes.io/zone", "bad key!"): "zone-a"}
	}
	if maybe(r, 0.2) {
		e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: "web-0"}
	}
	return e
}

func randSlicePort(r *rand.Rand) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{
		Name:        pick(r, nil, ptr(""), ptr("http"), ptr("http"), ptr("HTTP"), ptr("a_b")),
		Port:        pick(r, nil, ptr[int32](80), ptr[int32](8080), ptr[int32](0), ptr[int32](65536)),
		Protocol:    pick(r, nil, ptr(corev1.ProtocolTCP), ptr(corev1.ProtocolUDP), ptr(corev1.ProtocolSCTP), ptr(corev1.Protocol("ICMP")), ptr(corev1.Protocol(""))),
		AppProtocol: pick(r, nil, ptr("http"), ptr("bad proto")),
	}
}

func randSlice(r *rand.Rand) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abc", Namespace: namespace, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: pick(r, discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN, "", "Bogus"),
	}
	if maybe(r, 0.2) {
		s.Name = randObjectName(r)
	}
	if maybe(r, 0.1) {
		s.Labels["bad key!"] = "x"
	}
	for i, n := 0, r.Intn(4); i < n; i++ {
		s.Endpoints = append(s.Endpoints, randSliceEndpoint(r))
	}
	for i, n := 0, r.Intn(3); i < n; i++ {
		s.Ports = append(s.Ports, randSlicePort(r))
	}
	return s
}

func validSlice() *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: namespace, UID: "uid-3", ResourceVersion: "9", Generation: 1,
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
			NodeName: ptr("node-1"), Zone: ptr("zone-a")}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr[int32](8080), Protocol: ptr(corev1.ProtocolTCP)}},
	}
}

// Generation is kept by the store in svcnet (registry.Store, Info.Generation)
// and by the strategy in Kubernetes; the prepared objects are compared
// without it.
func clearGeneration(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	s.Generation = 0
	return s
}

func sliceCreateCase(r *rand.Rand) string {
	in := randSlice(r)
	ctx := requestCtx("create", "discovery.k8s.io", "v1", "endpointslices", "", in.Name)

	kv := in.DeepCopy()
	legacyscheme.Scheme.Default(kv)
	kDefaulted := kv.DeepCopy()
	ki := &discovery.EndpointSlice{}
	toInternal(kv, ki)
	k8sslice.Strategy.PrepareForCreate(ctx, ki)
	kErrs := genericrest.ValidateCreate(ctx, ki, k8sslice.Strategy)
	kPrepared := &discoveryv1.EndpointSlice{}
	toInternal(ki, kPrepared)

	st := endpointslice.NewStrategy()
	sv := in.DeepCopy()
	st.Default(sv)
	sDefaulted := sv.DeepCopy()
	st.PrepareForCreate(ctx, sv)
	sErrs := registry.ValidateCreate(ctx, st, true, sv)
	warnDiff := ""
	if len(kErrs) == 0 && len(sErrs) == 0 {
		warnDiff = compareWarnings("create", k8sslice.Strategy.WarningsOnCreate(ctx, ki), createWarnings(ctx, st, sv))
	}
	return withInput(joinDiffs(compareObjs("defaulted", kDefaulted, sDefaulted),
		compareObjs("prepared", clearGeneration(kPrepared), clearGeneration(sv.DeepCopy())),
		compareErrs("create", kErrs, sErrs), warnDiff), in)
}

func sliceUpdateCase(r *rand.Rand) string {
	old := validSlice()
	if maybe(r, 0.2) {
		old.Endpoints[0].Addresses[0] = "010.0.0.1"
	}
	in := old.DeepCopy()
	switch r.Intn(5) {
	case 0:
		in.Endpoints = append(in.Endpoints, randSliceEndpoint(r))
	case 1:
		in.Endpoints[0] = randSliceEndpoint(r)
	case 2:
		in.Ports = append(in.Ports, randSlicePort(r))
	case 3:
		in.AddressType = pick(r, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN, "", "Bogus")
	case 4:
		in.Name = randObjectName(r)
		in.Labels = map[string]string{"app": pick(r, "web", "bad value!")}
	}
	ctx := requestCtx("update", "discovery.k8s.io", "v1", "endpointslices", "", in.Name)

	kv := in.DeepCopy()
	legacyscheme.Scheme.Default(kv)
	kDefaulted := kv.DeepCopy()
	ki, kold := &discovery.EndpointSlice{}, &discovery.EndpointSlice{}
	toInternal(kv, ki)
	toInternal(old.DeepCopy(), kold)
	k8sslice.Strategy.PrepareForUpdate(ctx, ki, kold)
	kErrs := genericrest.ValidateUpdate(ctx, ki, kold, k8sslice.Strategy)
	kPrepared := &discoveryv1.EndpointSlice{}
	toInternal(ki, kPrepared)

	st := endpointslice.NewStrategy()
	sv := in.DeepCopy()
	st.Default(sv)
	sDefaulted := sv.DeepCopy()
	st.PrepareForUpdate(ctx, sv, old.DeepCopy())
	sErrs := registry.ValidateUpdate(ctx, st, true, sv, old.DeepCopy())
	warnDiff := ""
	if len(kErrs) == 0 && len(sErrs) == 0 {
		warnDiff = compareWarnings("update", k8sslice.Strategy.WarningsOnUpdate(ctx, ki, kold), updateWarnings(ctx, st, sv, old))
	}
	return withInput(joinDiffs(compareObjs("defaulted", kDefaulted, sDefaulted),
		compareObjs("prepared", clearGeneration(kPrepared), clearGeneration(sv.DeepCopy())),
		compareErrs("update", kErrs, sErrs), warnDiff), in, old)
}

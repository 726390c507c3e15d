package main

import (
	"math/rand"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	genericrest "k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	k8sservice "k8s.io/kubernetes/pkg/registry/core/service"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/service"
)

// svcSetters each set one Service field to a value drawn from a pool of
// valid, invalid and edge-case values.
var svcSetters = []func(r *rand.Rand, s *corev1.Service){
	func(r *rand.Rand, s *corev1.Service) {
		s.Name = pick(r, "web", "1web", "web.x", "Web", "a-b", strings.Repeat("a", 63), strings.Repeat("a", 64), "web-", "w_b", "..", "a%b")
	},
	func(r *rand.Rand, s *corev1.Service) {
		s.Labels = pick(r, map[string]string(nil), map[string]string{"app": "web"}, map[string]string{"bad key!": "x"},
			map[string]string{"app": "bad value!"}, map[string]string{"service.kubernetes.io/headless": ""})
	},
	func(r *rand.Rand, s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		k := pick(r, "service.kubernetes.io/topology-mode", "service.kubernetes.io/topology-aware-hints",
			"service.beta.kubernetes.io/load-balancer-source-ranges", "bad key!", "example.com/note")
		s.Annotations[k] = pick(r, "Auto", "auto", "", "10.0.0.0/8", "10.0.0.0/8, 192.168.0.0/16", "bad", "10.0.0.1/8", " 10.0.0.0/8 ")
	},
	func(r *rand.Rand, s *corev1.Service) {
		s.Spec.Type = pick(r, corev1.ServiceType(""), corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort,
			corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName, "Bogus")
	},
	func(r *rand.Rand, s *corev1.Service) {
		s.Spec.ClusterIP = pick(r, "", "None", "10.96.0.10", "10.96.0.010", "fd00::10", "bad", "::ffff:10.96.0.1", "0.0.0.0", "127.0.0.1")
	},
	func(r *rand.Rand, s *corev1.Service) {
		ip := s.Spec.ClusterIP
		s.Spec.ClusterIPs = pick(r, nil, []string{ip}, []string{ip, "fd00::10"}, []string{"None"}, []string{ip, "None"},
			[]string{"10.96.0.11", "10.96.0.12"}, []string{ip, "fd00::10", "10.96.0.13"}, []string{"fd00::10", "10.96.0.10"}, []string{"bad"})
	},
	func(r *rand.Rand, s *corev1.Service) {
		s.Spec.IPFamilies = pick(r, nil, []corev1.IPFamily{corev1.IPv4Protocol}, []corev1.IPFamily{corev1.IPv6Protocol},
			[]corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol},
			[]corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv4Protocol}, []corev1.IPFamily{"IPv5"})
	},
	func(r *rand.Rand, s *corev1.Service) {
		s.Spec.IPFamilyPolicy = pick(r, nil, ptr(corev1.IPFamilyPolicySingleStack), ptr(corev1.IPFamilyPolicyPreferDualStack),
			ptr(corev1.IPFamilyPolicyRequireDualStack), ptr(corev1.IPFamilyPolicy("Bogus")))
	},
	func(r *rand.Rand, s *corev1.Service) {
		n := pick(r, 0, 1, 1, 2, 3)
		s.Spec.Ports = nil
		for i := 0; i < n; i++ {
			s.Spec.Ports = append(s.Spec.Ports, randServicePort(r))
		}
	},
	func(r *rand.Rand, s *corev1.Service) {
		if len(s.Spec.Ports) > 0 {
			s.Spec.Ports[r.Intn(len(s.Spec.Ports))] = randServicePort(r)
		}
	},
	func(r *rand.Rand, s *corev1.Service) {
		s.Spec.Selector = pick(r, map[string]string(nil), map[string]string{}, map[string]string{"app": "web"},
			map[string]string{"bad key!": "x"}, map[string]string{"app": "bad value!"})
	},
	func(r *rand.Rand, s *corev1.Service) {
		s.Spec.ExternalIPs = pick(r, nil, []string{"1.2.3.4"}, []string{"127.0.0.1"}, []string{"bad"}, []string{"01.2.3.4"},
			[]string{"fe80::1"}, []string{"1.2.3.4", "2001:db8::1"}, []string{"0.0.0.0"}, []string{"224.0.0.1"})
	},
	func(r *rand.Rand, s *corev1.Service) {
		s.Spec.ExternalName = pick(r, "", "example.com", "example.com.", "Bad_Name", "1.2.3.4", strings.Repeat("a", 64)+".com")
	},
	func(r *rand.Rand, s *corev1.Service) {
		s.Spec.SessionAffinity = pick(r, corev1.ServiceAffinity(""), corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP, "Bogus")
		s.Spec.SessionAffinityConfig = pick(r, nil, &corev1.SessionAffinityConfig{}, &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{}},
			&corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr[int32](0)}},
			&corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr[int32](100)}},
			&corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr[int32](86401)}})
	},
	func(r *rand.Rand, s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = pick(r, corev1.ServiceExternalTrafficPolicy(""), corev1.ServiceExternalTrafficPolicyCluster,
			corev1.ServiceExternalTrafficPolicyLocal, "Bogus")
	},
	func(r *rand.Rand, s *corev1.Service) {
		s.Spec.InternalTrafficPolicy = pick(r, nil, ptr(corev1.ServiceInternalTrafficPolicyCluster),
			ptr(corev1.ServiceInternalTrafficPolicyLocal), ptr(corev1.ServiceInternalTrafficPolicy("Bogus")))
	},
	func(r *rand.Rand, s *corev1.Service) {
		s.Spec.HealthCheckNodePort = pick[int32](r, 0, 30001, 70000, -1)
	},
	func(r *rand.Rand, s *corev1.Service) {
		s.Spec.LoadBalancerSourceRanges = pick(r, nil, []string{"10.0.0.0/8"}, []string{" 10.0.0.0/8 "}, []string{"bad"},
			[]string{"10.0.0.1/8"}, []string{"2001:db8::/32", "010.0.0.0/8"})
	},
	func(r *rand.Rand, s *corev1.Service) {
		s.Spec.AllocateLoadBalancerNodePorts = pick(r, nil, ptr(true), ptr(false))
	},
	func(r *rand.Rand, s *corev1.Service) {
		s.Spec.LoadBalancerClass = pick(r, nil, ptr("example.com/lb"), ptr("bad class!"), ptr(""))
	},
	func(r *rand.Rand, s *corev1.Service) { s.Spec.LoadBalancerIP = pick(r, "", "1.2.3.4", "bad") },
	func(r *rand.Rand, s *corev1.Service) {
		s.Spec.TrafficDistribution = pick(r, nil, ptr(corev1.ServiceTrafficDistributionPreferClose),
			ptr(corev1.ServiceTrafficDistributionPreferSameZone), ptr(corev1.ServiceTrafficDistributionPreferSameNode), ptr("Bogus"))
	},
	func(r *rand.Rand, s *corev1.Service) { s.Spec.PublishNotReadyAddresses = maybe(r, 0.5) },
}

func randServicePort(r *rand.Rand) corev1.ServicePort {
	return corev1.ServicePort{
		Name:     pick(r, "", "http", "http", "dns", "HTTP", "a_b", strings.Repeat("p", 64)),
		Protocol: pick(r, corev1.Protocol(""), corev1.ProtocolTCP, corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP, "ICMP"),
		Port:     pick[int32](r, 80, 80, 443, 53, 0, 65536, -1),
		TargetPort: pick(r, intstr.IntOrString{}, intstr.FromInt32(8080), intstr.FromInt32(0), intstr.FromInt32(70000),
			intstr.FromString("http"), intstr.FromString(""), intstr.FromString("toolongportname123"), intstr.FromString("1234"), intstr.FromString("-x")),
		NodePort:    pick[int32](r, 0, 0, 0, 30000, 30000, 30001, 99999),
		AppProtocol: pick(r, nil, ptr("http"), ptr("bad proto"), ptr("kubernetes.io/h2c"), ptr("")),
	}
}

// baseService is a valid Service of a random shape (the seeds' shapes).
func baseService(r *rand.Rand) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	switch r.Intn(6) {
	case 0:
	case 1:
		s.Spec.Type = corev1.ServiceTypeNodePort
	case 2:
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
	case 3:
		s.Spec.Type = corev1.ServiceTypeExternalName
		s.Spec.ExternalName = "example.com"
		s.Spec.Selector = nil
	case 4:
		s.Spec.ClusterIP = "None"
	case 5:
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
	}
	return s
}

// randService: mostly a valid base with a few mutations, sometimes a Service
// built from random field values only.
func randService(r *rand.Rand) *corev1.Service {
	var s *corev1.Service
	var n int
	if maybe(r, 0.7) {
		s, n = baseService(r), 1+r.Intn(3)
	} else {
		s, n = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace}}, 2+r.Intn(10)
	}
	for i := 0; i < n; i++ {
		svcSetters[r.Intn(len(svcSetters))](r, s)
	}
	return s
}

// syncClusterIPs fills an empty clusterIPs from clusterIP, as the create and
// update paths of both apiservers do before validation.
func syncClusterIPs(s *corev1.Service) {
	if len(s.Spec.ClusterIPs) == 0 && s.Spec.ClusterIP != "" {
		s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
	}
}

func serviceCreateCase(r *rand.Rand) string {
	in := randService(r)
	return withInput(compareServiceCreate(in), in)
}

func compareServiceCreate(in *corev1.Service) string {
	ctx := requestCtx("create", "", "v1", "services", "", in.Name)

	kv := in.DeepCopy()
	legacyscheme.Scheme.Default(kv)
	syncClusterIPs(kv)
	kDefaulted := kv.DeepCopy()
	ki := &api.Service{}
	toInternal(kv, ki)
	k8sservice.Strategy.PrepareForCreate(ctx, ki)
	kErrs := genericrest.ValidateCreate(ctx, ki, k8sservice.Strategy)
	kPrepared := &corev1.Service{}
	toInternal(ki, kPrepared)

	st := &service.Strategy{}
	sv := in.DeepCopy()
	st.Default(sv)
	syncClusterIPs(sv)
	sDefaulted := sv.DeepCopy()
	st.PrepareForCreate(ctx, sv)
	sErrs := registry.ValidateCreate(ctx, st, true, sv)
	warnDiff := ""
	if len(kErrs) == 0 && len(sErrs) == 0 {
		warnDiff = compareWarnings("create", k8sservice.Strategy.WarningsOnCreate(ctx, ki), createWarnings(ctx, st, sv))
	}

	return joinDiffs(compareObjs("defaulted", kDefaulted, sDefaulted), compareObjs("prepared", kPrepared, sv),
		compareErrs("create", kErrs, sErrs), warnDiff)
}

// storedService is a valid Service as the apiserver stores it: defaulted,
// with a clusterIP and its family fields allocated.
func storedService(r *rand.Rand) *corev1.Service {
	s := baseService(r)
	legacyscheme.Scheme.Default(s)
	s.UID, s.ResourceVersion = "uid-1", "5"
	if s.Spec.Type != corev1.ServiceTypeExternalName {
		if s.Spec.ClusterIP == "" {
			s.Spec.ClusterIP = "10.96.0.77"
		}
		s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		s.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicySingleStack)
		if maybe(r, 0.3) && s.Spec.ClusterIP != "None" {
			s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, "fd00::77")
			s.Spec.IPFamilies = append(s.Spec.IPFamilies, corev1.IPv6Protocol)
			s.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicyPreferDualStack)
		}
	}
	for i := range s.Spec.Ports {
		if s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			s.Spec.Ports[i].NodePort = 30100 + int32(i)
		}
	}
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
		if maybe(r, 0.5) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 30200
		}
		if maybe(r, 0.5) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1", IPMode: ptr(corev1.LoadBalancerIPModeVIP)}}
		}
	}
	return s
}

func serviceUpdateCase(r *rand.Rand) string {
	old := storedService(r)
	in := old.DeepCopy()
	for i, n := 0, 1+r.Intn(3); i < n; i++ {
		svcSetters[r.Intn(len(svcSetters))](r, in)
	}
	return withInput(compareServiceUpdate(in, old), in, old)
}

func compareServiceUpdate(in, old *corev1.Service) string {
	ctx := requestCtx("update", "", "v1", "services", "", in.Name)

	kv := in.DeepCopy()
	legacyscheme.Scheme.Default(kv)
	syncClusterIPs(kv)
	kDefaulted := kv.DeepCopy()
	ki, kold := &api.Service{}, &api.Service{}
	toInternal(kv, ki)
	toInternal(old.DeepCopy(), kold)
	k8sservice.Strategy.PrepareForUpdate(ctx, ki, kold)
	kErrs := genericrest.ValidateUpdate(ctx, ki, kold, k8sservice.Strategy)
	kPrepared := &corev1.Service{}
	toInternal(ki, kPrepared)

	st := &service.Strategy{}
	sv := in.DeepCopy()
	st.Default(sv)
	syncClusterIPs(sv)
	sDefaulted := sv.DeepCopy()
	st.PrepareForUpdate(ctx, sv, old.DeepCopy())
	sErrs := registry.ValidateUpdate(ctx, st, true, sv, old.DeepCopy())
	warnDiff := ""
	if len(kErrs) == 0 && len(sErrs) == 0 {
		warnDiff = compareWarnings("update", k8sservice.Strategy.WarningsOnUpdate(ctx, ki, kold), updateWarnings(ctx, st, sv, old))
	}

	return joinDiffs(compareObjs("defaulted", kDefaulted, sDefaulted), compareObjs("prepared", kPrepared, sv),
		compareErrs("update", kErrs, sErrs), warnDiff)
}

func randIngress(r *rand.Rand) corev1.LoadBalancerIngress {
	return corev1.LoadBalancerIngress{
		IP:       pick(r, "", "192.0.2.1", "192.0.2.1", "bad", "01.2.3.4", "2001:db8::1"),
		Hostname: pick(r, "", "", "lb.example.com", "1.2.3.4", "Bad_Host"),
		IPMode:   pick(r, nil, ptr(corev1.LoadBalancerIPModeVIP), ptr(corev1.LoadBalancerIPModeProxy), ptr(corev1.LoadBalancerIPMode("Bogus"))),
	}
}

func serviceStatusCase(r *rand.Rand) string {
	old := storedService(r)
	in := old.DeepCopy()
	in.Status.LoadBalancer.Ingress = nil
	for i, n := 0, r.Intn(3); i < n; i++ {
		in.Status.LoadBalancer.Ingress = append(in.Status.LoadBalancer.Ingress, randIngress(r))
	}
	if maybe(r, 0.2) {
		svcSetters[r.Intn(len(svcSetters))](r, in) // a spec change, which the status strategy discards
	}
	return withInput(compareServiceStatus(in, old), in, old)
}

func compareServiceStatus(in, old *corev1.Service) string {
	ctx := requestCtx("update", "", "v1", "services", "status", in.Name)

	kv := in.DeepCopy()
	legacyscheme.Scheme.Default(kv)
	kDefaulted := kv.DeepCopy()
	ki, kold := &api.Service{}, &api.Service{}
	toInternal(kv, ki)
	toInternal(old.DeepCopy(), kold)
	k8sservice.StatusStrategy.PrepareForUpdate(ctx, ki, kold)
	kErrs := genericrest.ValidateUpdate(ctx, ki, kold, k8sservice.StatusStrategy)
	kPrepared := &corev1.Service{}
	toInternal(ki, kPrepared)

	st := (&service.Strategy{}).StatusStrategy()
	sv := in.DeepCopy()
	st.Default(sv)
	sDefaulted := sv.DeepCopy()
	st.PrepareForUpdate(ctx, sv, old.DeepCopy())
	sErrs := registry.ValidateUpdate(ctx, st, true, sv, old.DeepCopy())
	warnDiff := ""
	if len(kErrs) == 0 && len(sErrs) == 0 {
		warnDiff = compareWarnings("status", k8sservice.StatusStrategy.WarningsOnUpdate(ctx, ki, kold), updateWarnings(ctx, st, sv, old))
	}

	return joinDiffs(compareObjs("defaulted", kDefaulted, sDefaulted), compareObjs("prepared", kPrepared, sv),
		compareErrs("status", kErrs, sErrs), warnDiff)
}

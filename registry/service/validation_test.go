package service

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func ptr[T any](v T) *T { return &v }

// base is a valid, defaulted ClusterIP Service after allocation.
func base() *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Selector:       map[string]string{"app": "web"},
			Ports:          []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
			ClusterIP:      "10.96.12.34",
			ClusterIPs:     []string{"10.96.12.34"},
			IPFamilies:     []corev1.IPFamily{corev1.IPv4Protocol},
			IPFamilyPolicy: ptr(corev1.IPFamilyPolicySingleStack),
		},
	}
	SetDefaults(svc)
	return svc
}

// errString renders the errors as kube-apiserver's Status message body does.
func errString(svc *corev1.Service) string {
	return ValidateService(svc).ToAggregate().Error()
}

func TestValidateService(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*corev1.Service)
		want   string // "" = accepted
	}{
		{"valid", func(*corev1.Service) {}, ""},
		{"name starting with digit accepted (RFC 1123 label)", func(s *corev1.Service) { s.Name = "1web" }, ""},
		{"name with dot rejected", func(s *corev1.Service) { s.Name = "web.x" },
			`metadata.name: Invalid value: "web.x": must not contain dots`},
		{"name upper case rejected", func(s *corev1.Service) { s.Name = "Web" },
			`metadata.name: Invalid value: "Web": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{"ports required", func(s *corev1.Service) { s.Spec.Ports = nil }, `spec.ports: Required value`},
		{"headless without ports accepted", func(s *corev1.Service) {
			s.Spec.Ports = nil
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"}
		}, ""},
		{"port name required with two ports", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "b", Port: 81, Protocol: "TCP", TargetPort: intstr.FromInt32(81)})
		}, `spec.ports[0].name: Required value`},
		{"two named ports accepted", func(s *corev1.Service) {
			s.Spec.Ports[0].Name = "a"
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "b", Port: 81, Protocol: "TCP", TargetPort: intstr.FromInt32(81)})
		}, ""},
		{"duplicate port name", func(s *corev1.Service) {
			s.Spec.Ports[0].Name = "a"
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "a", Port: 81, Protocol: "TCP", TargetPort: intstr.FromInt32(81)})
		}, `spec.ports[1].name: Duplicate value: "a"`},
		{"port name not a label", func(s *corev1.Service) { s.Spec.Ports[0].Name = "Http" },
			`spec.ports[0].name: Invalid value: "Http": a lowercase RFC 1123 label must consist of`},
		{"port 0", func(s *corev1.Service) { s.Spec.Ports[0].Port = 0 },
			`spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive`},
		{"port 65536", func(s *corev1.Service) { s.Spec.Ports[0].Port = 65536 },
			`spec.ports[0].port: Invalid value: 65536: must be between 1 and 65535, inclusive`},
		{"protocol unsupported", func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "ICMP" },
			`spec.ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"`},
		{"SCTP accepted", func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "SCTP" }, ""},
		{"named targetPort accepted", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("http-web") }, ""},
		{"targetPort name too long", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("abcdefghijklmnop") },
			`spec.ports[0].targetPort: Invalid value: "abcdefghijklmnop": must be no more than 15 characters`},
		{"targetPort name without letter", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("123") },
			`spec.ports[0].targetPort: Invalid value: "123": must contain at least one letter (a-z)`},
		{"targetPort number out of range", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(70000) },
			`spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive`},
		{"duplicate port+protocol", func(s *corev1.Service) {
			s.Spec.Ports[0].Name = "a"
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "b", Port: 80, Protocol: "TCP", TargetPort: intstr.FromInt32(81)})
		}, `spec.ports[1]: Duplicate value: {"Name":"","Protocol":"TCP","AppProtocol":null,"Port":80,"TargetPort":0,"NodePort":0}`},
		{"same port different protocol accepted", func(s *corev1.Service) {
			s.Spec.Ports[0].Name = "a"
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "b", Port: 80, Protocol: "UDP", TargetPort: intstr.FromInt32(81)})
		}, ""},
		{"selector label value invalid", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "a b"} },
			`spec.selector: Invalid value: "a b": a valid label must be an empty string or consist of alphanumeric characters`},
		{"sessionAffinity unsupported", func(s *corev1.Service) { s.Spec.SessionAffinity = "Cookie" },
			`spec.sessionAffinity: Unsupported value: "Cookie": supported values: "ClientIP", "None"`},
		{"ClientIP timeout 0", func(s *corev1.Service) {
			s.Spec.SessionAffinity = "ClientIP"
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(0))}}
		}, `spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 0: must be greater than 0 and less than 86400`},
		{"ClientIP timeout 86400 accepted", func(s *corev1.Service) {
			s.Spec.SessionAffinity = "ClientIP"
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(86400))}}
		}, ""},
		{"ClientIP timeout 86401", func(s *corev1.Service) {
			s.Spec.SessionAffinity = "ClientIP"
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(86401))}}
		}, `spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 86401: must be greater than 0 and less than 86400`},
		{"affinity config with None", func(s *corev1.Service) {
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(10))}}
		}, `spec.sessionAffinityConfig: Forbidden: must not be set when session affinity is None`},
		{"clusterIPs must match clusterIP", func(s *corev1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.9"} },
			`spec.clusterIPs: Invalid value: ["10.96.0.9"]: first value must match ` + "`clusterIP`"},
		{"clusterIP invalid", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.300", []string{"10.96.0.300"} },
			`spec.clusterIPs[0]: Invalid value: "10.96.0.300": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`},
		{"clusterIP family mismatch", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "fd00::5", []string{"fd00::5"} },
			"spec.clusterIPs[0]: Invalid value: \"fd00::5\": expected an IPv4 value as indicated by `ipFamilies[0]`"},
		{"two v4 clusterIPs", func(s *corev1.Service) {
			s.Spec.ClusterIPs = []string{"10.96.12.34", "10.96.12.35"}
			s.Spec.IPFamilies = nil
		}, `spec.clusterIPs: Invalid value: ["10.96.12.34","10.96.12.35"]: may specify no more than one IP for each IP family`},
		{"ipFamilies unsupported", func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{"IPv5"} },
			`spec.ipFamilies[0]: Unsupported value: "IPv5": supported values: "IPv4", "IPv6"`},
		{"ipFamilyPolicy unsupported", func(s *corev1.Service) { s.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicy("Both")) },
			`spec.ipFamilyPolicy: Unsupported value: "Both": supported values: "PreferDualStack", "RequireDualStack", "SingleStack"`},
		{"headless NodePort", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"}
			s.Spec.ExternalTrafficPolicy = "Cluster"
		}, `spec.clusterIPs[0]: Invalid value: "None": may not be set to 'None' for NodePort services`},
		{"headless LoadBalancer", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"}
			s.Spec.ExternalTrafficPolicy = "Cluster"
			s.Spec.AllocateLoadBalancerNodePorts = ptr(true)
		}, `spec.clusterIPs[0]: Invalid value: "None": may not be set to 'None' for LoadBalancer services`},
		{"ExternalName accepted", func(s *corev1.Service) { toExternalName(s, "db.example.com.") }, ""},
		{"ExternalName required", func(s *corev1.Service) { toExternalName(s, "") }, `spec.externalName: Required value`},
		{"ExternalName invalid", func(s *corev1.Service) { toExternalName(s, "db_example.com") },
			`spec.externalName: Invalid value: "db_example.com": a lowercase RFC 1123 subdomain must consist of`},
		{"ExternalName with clusterIPs", func(s *corev1.Service) {
			toExternalName(s, "db.example.com")
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.5", []string{"10.96.0.5"}
		}, `spec.clusterIPs: Forbidden: may not be set for ExternalName services`},
		{"ExternalName with ipFamilies", func(s *corev1.Service) {
			toExternalName(s, "db.example.com")
			s.Spec.IPFamilies = []corev1.IPFamily{"IPv4"}
		}, `spec.ipFamilies: Forbidden: may not be set for ExternalName services`},
		{"nodePort on ClusterIP", func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30080 },
			"spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"},
		{"duplicate nodePort", func(s *corev1.Service) {
			toNodePort(s)
			s.Spec.Ports[0].Name = "a"
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "b", Port: 81, Protocol: "TCP", NodePort: 30080, TargetPort: intstr.FromInt32(81)})
		}, `spec.ports[1].nodePort: Duplicate value: 30080`},
		{"shared nodePort across protocols accepted", func(s *corev1.Service) {
			toNodePort(s)
			s.Spec.Ports[0].Name = "a"
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "b", Port: 80, Protocol: "UDP", NodePort: 30080, TargetPort: intstr.FromInt32(80)})
		}, ""},
		{"externalTrafficPolicy on plain ClusterIP", func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = "Cluster" },
			`spec.externalTrafficPolicy: Invalid value: "Cluster": may only be set for externally-accessible services`},
		{"externalTrafficPolicy with externalIPs accepted", func(s *corev1.Service) {
			s.Spec.ExternalIPs = []string{"192.0.2.10"}
			s.Spec.ExternalTrafficPolicy = "Local"
		}, ""},
		{"externalTrafficPolicy required on NodePort", func(s *corev1.Service) { toNodePort(s); s.Spec.ExternalTrafficPolicy = "" },
			`spec.externalTrafficPolicy: Required value`},
		{"externalTrafficPolicy unsupported", func(s *corev1.Service) { toNodePort(s); s.Spec.ExternalTrafficPolicy = "Global" },
			`spec.externalTrafficPolicy: Unsupported value: "Global": supported values: "Cluster", "Local"`},
		{"healthCheckNodePort on NodePort", func(s *corev1.Service) { toNodePort(s); s.Spec.HealthCheckNodePort = 31000 },
			"spec.healthCheckNodePort: Invalid value: 31000: may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"},
		{"healthCheckNodePort required for LB+Local", func(s *corev1.Service) {
			toNodePort(s)
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.AllocateLoadBalancerNodePorts = ptr(true)
			s.Spec.ExternalTrafficPolicy = "Local"
		}, `spec.healthCheckNodePort: Required value`},
		{"externalIP invalid", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"1.2.3"} },
			`spec.externalIPs[0]: Invalid value: "1.2.3": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`},
		{"externalIP loopback", func(s *corev1.Service) {
			s.Spec.ExternalIPs = []string{"127.0.0.2"}
			s.Spec.ExternalTrafficPolicy = "Cluster"
		},
			`spec.externalIPs[0]: Invalid value: "127.0.0.2": may not be in the loopback range (127.0.0.0/8, ::1/128)`},
		{"loadBalancerSourceRanges on ClusterIP", func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"} },
			"spec.LoadBalancerSourceRanges: Forbidden: may only be used when `type` is 'LoadBalancer'"},
		{"loadBalancerSourceRanges invalid", func(s *corev1.Service) {
			toNodePort(s)
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.AllocateLoadBalancerNodePorts = ptr(true)
			s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/33"}
		}, `spec.LoadBalancerSourceRanges[0]: Invalid value: "10.0.0.0/33": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)`},
		{"allocateLoadBalancerNodePorts on ClusterIP", func(s *corev1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr(true) },
			"spec.allocateLoadBalancerNodePorts: Forbidden: may only be used when `type` is 'LoadBalancer'"},
		{"type unsupported", func(s *corev1.Service) { s.Spec.Type = "Gateway" },
			`spec.type: Unsupported value: "Gateway": supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"`},
		{"internalTrafficPolicy unsupported", func(s *corev1.Service) {
			s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicy("Node"))
		},
			`spec.internalTrafficPolicy: Unsupported value: "Node": supported values: "Cluster", "Local"`},
		{"sessionAffinity required", func(s *corev1.Service) { s.Spec.SessionAffinity = "" }, `spec.sessionAffinity: Required value`},
		{"ClientIP without config", func(s *corev1.Service) { s.Spec.SessionAffinity = "ClientIP" },
			`spec.sessionAffinityConfig: Required value: when session affinity type is ClientIP`},
		{"three clusterIPs", func(s *corev1.Service) {
			s.Spec.ClusterIPs = []string{"10.96.12.34", "fd00::1", "10.96.0.2"}
			s.Spec.IPFamilies = nil
		}, `spec.clusterIPs: Invalid value: ["10.96.12.34","fd00::1","10.96.0.2"]: may only hold up to 2 values`},
		{"None not alone", func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None", "10.96.0.2"}
		}, `spec.clusterIPs: Invalid value: ["None","10.96.0.2"]: 'None' must be the first and only value`},
		{"clusterIPs without clusterIP", func(s *corev1.Service) { s.Spec.ClusterIP = "" },
			"spec.clusterIPs: Invalid value: [\"10.96.12.34\"]: must be empty when `clusterIP` is not specified"},
		{"dual-stack clusterIPs accepted", func(s *corev1.Service) {
			s.Spec.ClusterIPs = []string{"10.96.12.34", "fd00:10:96::5"}
			s.Spec.IPFamilies = []corev1.IPFamily{"IPv4", "IPv6"}
			s.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicyRequireDualStack)
		}, ""},
		{"duplicate ipFamilies", func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{"IPv4", "IPv4"} },
			`spec.ipFamilies[1]: Duplicate value: "IPv4"`},
		{"ExternalName with ipFamilyPolicy", func(s *corev1.Service) {
			toExternalName(s, "db.example.com")
			s.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicySingleStack)
		}, `spec.ipFamilyPolicy: Forbidden: may not be set for ExternalName services`},
		{"ExternalName without ports accepted", func(s *corev1.Service) { toExternalName(s, "db.example.com"); s.Spec.Ports = nil }, ""},
		{"allocateLoadBalancerNodePorts required on LoadBalancer", func(s *corev1.Service) {
			toNodePort(s)
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
		}, `allocateLoadBalancerNodePorts: Required value`},
		{"internalTrafficPolicy required", func(s *corev1.Service) { s.Spec.InternalTrafficPolicy = nil },
			`spec.internalTrafficPolicy: Required value`},
		{"appProtocol invalid", func(s *corev1.Service) { s.Spec.Ports[0].AppProtocol = ptr("-http") },
			`spec.ports[0].appProtocol: Invalid value: "-http": name part must consist of alphanumeric characters`},
		{"appProtocol accepted", func(s *corev1.Service) { s.Spec.Ports[0].AppProtocol = ptr("kubernetes.io/h2c") }, ""},
		{"externalIP link-local", func(s *corev1.Service) {
			s.Spec.ExternalIPs = []string{"169.254.1.1"}
			s.Spec.ExternalTrafficPolicy = "Cluster"
		}, `spec.externalIPs[0]: Invalid value: "169.254.1.1": may not be in the link-local range (169.254.0.0/16, fe80::/10)`},
		{"source-ranges annotation on ClusterIP", func(s *corev1.Service) {
			s.Annotations = map[string]string{"service.beta.kubernetes.io/load-balancer-source-ranges": "10.0.0.0/8"}
		}, "metadata.annotations[service.beta.kubernetes.io/load-balancer-source-ranges]: Forbidden: may only be used when `type` is 'LoadBalancer'"},
		{"topology annotations disagree", func(s *corev1.Service) {
			s.Annotations = map[string]string{"service.kubernetes.io/topology-mode": "Auto", "service.kubernetes.io/topology-aware-hints": "Disabled"}
		}, `metadata.annotations[service.kubernetes.io/topology-mode]: Invalid value: "Auto": must match annotations[service.kubernetes.io/topology-aware-hints] when both are specified`},
		{"trafficDistribution PreferClose accepted", func(s *corev1.Service) { s.Spec.TrafficDistribution = ptr("PreferClose") }, ""},
		{"trafficDistribution unsupported", func(s *corev1.Service) { s.Spec.TrafficDistribution = ptr("Nearest") },
			`spec.trafficDistribution: Unsupported value: "Nearest": supported values: "PreferClose", "PreferSameZone", "PreferSameNode"`},
		{"loadBalancerClass invalid", func(s *corev1.Service) {
			toNodePort(s)
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.AllocateLoadBalancerNodePorts = ptr(true)
			s.Spec.LoadBalancerClass = ptr("a b")
		}, `spec.loadBalancerClass: Invalid value: "a b"`},
		{"loadBalancerClass on ClusterIP", func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr("example.com/lb") },
			"spec.loadBalancerClass: Forbidden: may only be used when `type` is 'LoadBalancer'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := base()
			tc.mutate(svc)
			errs := ValidateService(svc)
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("want accepted, got %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) == 0 {
				t.Fatalf("want %q, accepted", tc.want)
			}
			if got := errString(svc); !strings.Contains(got, tc.want) {
				t.Fatalf("errors\n  got:  %s\n  want: %s", got, tc.want)
			}
		})
	}
}

func toExternalName(s *corev1.Service, name string) {
	s.Spec.Type = corev1.ServiceTypeExternalName
	s.Spec.ExternalName = name
	s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = "", nil, nil, nil
	s.Spec.InternalTrafficPolicy = nil
}

func toNodePort(s *corev1.Service) {
	s.Spec.Type = corev1.ServiceTypeNodePort
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	s.Spec.Ports[0].NodePort = 30080
}

func TestValidateServiceUpdate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*corev1.Service)
		want   string
	}{
		{"unchanged", func(*corev1.Service) {}, ""},
		{"clusterIP changed", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.12.35", []string{"10.96.12.35"} },
			`spec.clusterIPs[0]: Invalid value: ["10.96.12.35"]: may not change once set`},
		{"to ExternalName may drop clusterIP", func(s *corev1.Service) { toExternalName(s, "db.example.com") }, ""},
		{"ipFamilies changed", func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{"IPv6"} },
			`spec.ipFamilies[0]: Invalid value: ["IPv6"]: may not change once set`},
		{"healthCheckNodePort changed", func(s *corev1.Service) { s.Spec.HealthCheckNodePort = 31001 },
			"spec.healthCheckNodePort: Forbidden: field is immutable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := base()
			old.ResourceVersion = "5"
			if tc.name == "healthCheckNodePort changed" {
				toNodePort(old)
				old.Spec.Type = corev1.ServiceTypeLoadBalancer
				old.Spec.AllocateLoadBalancerNodePorts = ptr(true)
				old.Spec.ExternalTrafficPolicy = "Local"
				old.Spec.HealthCheckNodePort = 31000
			}
			svc := old.DeepCopy()
			tc.mutate(svc)
			errs := ValidateServiceUpdate(svc, old)
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("want accepted, got %v", errs.ToAggregate())
				}
				return
			}
			if got := errs.ToAggregate(); got == nil || !strings.Contains(got.Error(), tc.want) {
				t.Fatalf("errors\n  got:  %v\n  want: %s", got, tc.want)
			}
		})
	}
}

func TestSetDefaults(t *testing.T) {
	svc := &corev1.Service{Spec: corev1.ServiceSpec{
		Ports:                 []corev1.ServicePort{{Port: 38080}},
		SessionAffinityConfig: &corev1.SessionAffinityConfig{},
	}}
	SetDefaults(svc)
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.SessionAffinity != corev1.ServiceAffinityNone ||
		svc.Spec.SessionAffinityConfig != nil {
		t.Fatalf("type/affinity defaults wrong: %+v", svc.Spec)
	}
	if p := svc.Spec.Ports[0]; p.Protocol != corev1.ProtocolTCP || p.TargetPort != intstr.FromInt32(38080) {
		t.Fatalf("port defaults wrong: %+v", p)
	}
	if svc.Spec.InternalTrafficPolicy == nil || *svc.Spec.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyCluster {
		t.Fatalf("internalTrafficPolicy not Cluster")
	}
	if svc.Spec.ExternalTrafficPolicy != "" || svc.Spec.AllocateLoadBalancerNodePorts != nil {
		t.Fatalf("ClusterIP got external-only defaults: %+v", svc.Spec)
	}

	ci := &corev1.Service{Spec: corev1.ServiceSpec{SessionAffinity: corev1.ServiceAffinityClientIP, ExternalIPs: []string{"192.0.2.1"}}}
	SetDefaults(ci)
	if c := ci.Spec.SessionAffinityConfig; c == nil || c.ClientIP == nil || *c.ClientIP.TimeoutSeconds != 10800 {
		t.Fatalf("ClientIP timeout not defaulted to 10800: %+v", c)
	}
	if ci.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster {
		t.Fatalf("ClusterIP with externalIPs: externalTrafficPolicy = %q, want Cluster", ci.Spec.ExternalTrafficPolicy)
	}

	lb := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.7"}}
	SetDefaults(lb)
	if lb.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster || lb.Spec.AllocateLoadBalancerNodePorts == nil ||
		!*lb.Spec.AllocateLoadBalancerNodePorts {
		t.Fatalf("LoadBalancer defaults wrong: %+v", lb.Spec)
	}

	en := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "x.example.com"}}
	SetDefaults(en)
	if en.Spec.InternalTrafficPolicy != nil || en.Spec.ExternalTrafficPolicy != "" {
		t.Fatalf("ExternalName got traffic policies: %+v", en.Spec)
	}
	// A targetPort given by name is kept.
	named := &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}}
	SetDefaults(named)
	if named.Spec.Ports[0].TargetPort != intstr.FromString("http") {
		t.Fatalf("named targetPort replaced: %v", named.Spec.Ports[0].TargetPort)
	}
}

func TestValidateServiceStatusUpdate(t *testing.T) {
	lb := base()
	toNodePort(lb)
	lb.Spec.Type = corev1.ServiceTypeLoadBalancer
	lb.Spec.AllocateLoadBalancerNodePorts = ptr(true)
	lb.ResourceVersion = "3"
	vip := corev1.LoadBalancerIPModeVIP
	cases := []struct {
		name string
		svc  *corev1.Service
		ing  []corev1.LoadBalancerIngress
		want string
	}{
		{"ip with mode", lb, []corev1.LoadBalancerIngress{{IP: "192.0.2.50", IPMode: &vip}}, ""},
		{"hostname", lb, []corev1.LoadBalancerIngress{{Hostname: "lb.example.com"}}, ""},
		{"ip without mode", lb, []corev1.LoadBalancerIngress{{IP: "192.0.2.50"}}, "status.loadBalancer.ingress[0].ipMode: Required value: must be specified when `ip` is set"},
		{"hostname is an IP", lb, []corev1.LoadBalancerIngress{{Hostname: "192.0.2.1"}}, `status.loadBalancer.ingress[0].hostname: Invalid value: "192.0.2.1": must be a DNS name, not an IP address`},
		{"not a LoadBalancer", base(), []corev1.LoadBalancerIngress{{IP: "192.0.2.50", IPMode: &vip}}, "status.loadBalancer.ingress: Forbidden: may only be used when `spec.type` is 'LoadBalancer'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := tc.svc.DeepCopy()
			old.ResourceVersion = "3"
			svc := old.DeepCopy()
			svc.Status.LoadBalancer.Ingress = tc.ing
			errs := ValidateServiceStatusUpdate(svc, old)
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("want accepted, got %v", errs.ToAggregate())
				}
				return
			}
			if got := errs.ToAggregate(); got == nil || !strings.Contains(got.Error(), tc.want) {
				t.Fatalf("got %v, want %s", got, tc.want)
			}
		})
	}
}

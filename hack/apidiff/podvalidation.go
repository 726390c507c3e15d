package main

import (
	"math/rand"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/apps"
	api "k8s.io/kubernetes/pkg/apis/core"
	k8sdeployment "k8s.io/kubernetes/pkg/registry/apps/deployment"
	k8spod "k8s.io/kubernetes/pkg/registry/core/pod"

	"github.com/svcnet/svcnet/registry/core"
)

// Pods: create and update through kube-apiserver's pod strategy and
// svcnet's. The generator writes what users write in manifests (the
// seeds' walkthroughs: containers with ports, env, probes, resources,
// volumes, restart and DNS policies, node selectors, tolerations) and
// breaks one or two things in it, each as a user would.

// validPod is a pod as a manifest writes it.
func validPod(r *rand.Rand) *corev1.Pod {
	c := corev1.Container{Name: "app", Image: pick(r, "nginx", "nginx:1.25", "registry:5000/web:v1")}
	if maybe(r, 0.6) {
		c.Ports = []corev1.ContainerPort{{Name: pick(r, "", "http"), ContainerPort: 80}}
	}
	if maybe(r, 0.4) {
		c.Env = []corev1.EnvVar{{Name: "MODE", Value: "prod"}}
	}
	if maybe(r, 0.3) {
		c.Command = []string{"sh", "-c", "sleep 3600"}
	}
	if maybe(r, 0.3) {
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
		if maybe(r, 0.5) {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
		}
	}
	if maybe(r, 0.3) {
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(80)}}}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: namespace, Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
	}
	if maybe(r, 0.3) {
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	}
	if maybe(r, 0.2) {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox", Command: []string{"sleep", "inf"}})
	}
	return pod
}

// podFaults break one thing each, as users do.
var podFaults = []func(r *rand.Rand, p *corev1.Pod){
	func(r *rand.Rand, p *corev1.Pod) { p.Name = randObjectName(r) },
	func(r *rand.Rand, p *corev1.Pod) {
		p.Labels = map[string]string{pick(r, "bad key!", "app"): pick(r, "web", "Bad Value", strings.Repeat("v", 64))}
	},
	func(r *rand.Rand, p *corev1.Pod) { p.Spec.Containers = nil },
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Containers[0].Name = pick(r, "", "Bad_Name", "APP", strings.Repeat("c", 64))
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "app", Image: "busybox"})
	},
	func(r *rand.Rand, p *corev1.Pod) { p.Spec.Containers[0].Image = pick(r, "", " nginx", "nginx ") },
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{
			Name:          pick(r, "", "http", "Bad_Port", "toolongportname1", "8080", "a--b"),
			ContainerPort: pick[int32](r, 80, 8080, 0, -1, 70000),
			HostPort:      pick[int32](r, 0, 0, 8080, 70000, -1),
			Protocol:      pick(r, corev1.Protocol(""), corev1.ProtocolUDP, corev1.ProtocolSCTP, "ICMP", "tcp"),
			HostIP:        pick(r, "", "", "10.0.0.1", "bad"),
		})
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "other", Image: "busybox",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080, HostPort: pick[int32](r, 8080, 9090), Protocol: pick(r, corev1.Protocol(""), corev1.ProtocolUDP)}}})
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: pick(r, "", "1BAD", "A=B", "my.var", "MODE")})
	},
	func(r *rand.Rand, p *corev1.Pod) {
		e := corev1.EnvVar{Name: "FROM", ValueFrom: &corev1.EnvVarSource{}}
		switch r.Intn(5) {
		case 0:
		case 1:
			e.ValueFrom.FieldRef = &corev1.ObjectFieldSelector{FieldPath: pick(r, "status.podIP", "metadata.name", "spec.nodeName", "spec.bogus", "metadata.labels['app']")}
		case 2:
			e.ValueFrom.ConfigMapKeyRef = &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: pick(r, "cfg", "")}, Key: pick(r, "k", "", "bad key!")}
		case 3:
			e.ValueFrom.SecretKeyRef = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}
			e.ValueFrom.FieldRef = &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}
		case 4:
			e.Value = "x"
			e.ValueFrom.ResourceFieldRef = &corev1.ResourceFieldSelector{Resource: pick(r, "limits.cpu", "requests.memory", "bogus")}
		}
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, e)
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{
			Name: pick(r, "data", "missing", ""), MountPath: pick(r, "/data", "/other", "", "relative")})
	},
	func(r *rand.Rand, p *corev1.Pod) {
		v := corev1.Volume{Name: pick(r, "data", "Bad_Vol", "", "cfg")}
		switch r.Intn(5) {
		case 0:
		case 1:
			v.EmptyDir = &corev1.EmptyDirVolumeSource{}
		case 2:
			v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: pick(r, "cfg", "")}}
		case 3:
			v.HostPath = &corev1.HostPathVolumeSource{Path: pick(r, "/var/log", "", "/a/../b")}
		case 4:
			v.EmptyDir = &corev1.EmptyDirVolumeSource{}
			v.Secret = &corev1.SecretVolumeSource{SecretName: "s"}
		}
		p.Spec.Volumes = append(p.Spec.Volumes, v)
	},
	func(r *rand.Rand, p *corev1.Pod) {
		rr := &p.Spec.Containers[0].Resources
		*rr = corev1.ResourceRequirements{} // one resource fault per pod: see below
		switch r.Intn(4) {
		case 0:
			rr.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
			rr.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		case 1:
			rr.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1Mi")}
		case 2:
			rr.Requests = corev1.ResourceList{"bogus": resource.MustParse("1")}
		case 3:
			rr.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.0001")}
		}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		pr := &corev1.Probe{PeriodSeconds: pick[int32](r, 0, 10, -1), TimeoutSeconds: pick[int32](r, 0, -1),
			SuccessThreshold: pick[int32](r, 0, 1, 2), FailureThreshold: pick[int32](r, 0, 3, -2), InitialDelaySeconds: pick[int32](r, 0, -5)}
		switch r.Intn(4) {
		case 0:
		case 1:
			pr.HTTPGet = &corev1.HTTPGetAction{Port: pick(r, intstr.FromInt32(80), intstr.FromInt32(0), intstr.FromString("http"), intstr.FromString("Bad_Port"))}
		case 2:
			pr.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}
			pr.Exec = &corev1.ExecAction{Command: []string{"true"}}
		case 3:
			pr.Exec = &corev1.ExecAction{Command: []string{"true"}}
		}
		switch r.Intn(3) {
		case 0:
			p.Spec.Containers[0].LivenessProbe = pr
		case 1:
			p.Spec.Containers[0].ReadinessProbe = pr
		case 2:
			p.Spec.Containers[0].StartupProbe = pr
		}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Containers[0].ImagePullPolicy = pick[corev1.PullPolicy](r, "Sometimes", "always")
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Containers[0].TerminationMessagePolicy = pick[corev1.TerminationMessagePolicy](r, "Bogus")
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.RestartPolicy = pick[corev1.RestartPolicy](r, "Sometimes", "always", corev1.RestartPolicyNever)
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.DNSPolicy = pick[corev1.DNSPolicy](r, "Bogus", corev1.DNSNone, corev1.DNSDefault)
		if maybe(r, 0.5) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{pick(r, "10.96.0.10", "bad")}, Searches: []string{pick(r, "svc.cluster.local", "Bad_Domain")},
				Options: []corev1.PodDNSConfigOption{{Name: pick(r, "ndots", "")}}}
		}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{pick(r, "disktype", "bad key!", "kubernetes.io/hostname"): pick(r, "ssd", "Bad Value")}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.ServiceAccountName = pick(r, "builder", "Bad_SA", "a.b")
		if maybe(r, 0.3) {
			p.Spec.DeprecatedServiceAccount = "other"
		}
	},
	func(r *rand.Rand, p *corev1.Pod) { p.Spec.NodeName = pick(r, "node-1", "Bad_Node") },
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Hostname = pick(r, "web", "Bad_Host", "a.b")
		p.Spec.Subdomain = pick(r, "", "web", "Bad_Sub")
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.ActiveDeadlineSeconds = ptr(pick[int64](r, 0, -1, 30))
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.TerminationGracePeriodSeconds = ptr(pick[int64](r, -1, 0, 10))
	},
	func(r *rand.Rand, p *corev1.Pod) {
		t := corev1.Toleration{Key: pick(r, "node-role", "", "bad key!"), Operator: pick(r, corev1.TolerationOpExists, corev1.TolerationOpEqual, "", "Gt"),
			Value: pick(r, "", "x", "Bad Value"), Effect: pick(r, corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, "", "Bogus")}
		if maybe(r, 0.3) {
			t.TolerationSeconds = ptr[int64](30)
		}
		p.Spec.Tolerations = append(p.Spec.Tolerations, t)
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr(pick[int64](r, 1000, -1)), FSGroup: pick(r, nil, ptr[int64](-2))}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr(pick[int64](r, 1000, -1)), Privileged: ptr(maybe(r, 0.5)),
			AllowPrivilegeEscalation: pick(r, nil, ptr(false))}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: pick(r, "init", "app", "Bad_Init"), Image: pick(r, "busybox", ""),
			ReadinessProbe: pick(r, nil, &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}})})
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{}}
		if maybe(r, 0.5) {
			p.Spec.Containers[0].Lifecycle.PreStop.Exec = &corev1.ExecAction{Command: []string{"sleep", "5"}}
		}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.HostNetwork = true
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: pick[int32](r, 0, 80, 81)}}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		v := corev1.Volume{Name: pick(r, "cfg", "secret-vol", "token")}
		switch r.Intn(6) {
		case 0:
			v.Secret = &corev1.SecretVolumeSource{SecretName: pick(r, "s", ""), DefaultMode: pick(r, nil, ptr[int32](0644), ptr[int32](01000), ptr[int32](-1)),
				Items: []corev1.KeyToPath{{Key: pick(r, "k", ""), Path: pick(r, "a/b", "", "/abs", "../up", "..x", "a/../b"), Mode: pick(r, nil, ptr[int32](0600), ptr[int32](800))}}}
		case 1:
			v.Projected = &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}
			if maybe(r, 0.5) {
				p.Spec.ServiceAccountName = "builder"
			}
		case 2:
			v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pick(r, "data", "")}
		case 3:
			v.HostPath = &corev1.HostPathVolumeSource{Path: "/var/run", Type: ptr(pick[corev1.HostPathType](r, corev1.HostPathDirectory, "Bogus", corev1.HostPathSocket))}
		case 4:
			v.EmptyDir = &corev1.EmptyDirVolumeSource{Medium: pick[corev1.StorageMedium](r, "", corev1.StorageMediumMemory), SizeLimit: pick(r, nil, ptr(resource.MustParse("-1Gi")), ptr(resource.MustParse("1Gi")))}
		case 5:
			v.DownwardAPI = &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}
		}
		p.Spec.Volumes = append(p.Spec.Volumes, v)
	},
	func(r *rand.Rand, p *corev1.Pod) {
		e := corev1.EnvFromSource{Prefix: pick(r, "", "APP_", "A=B")}
		switch r.Intn(4) {
		case 0:
		case 1:
			e.ConfigMapRef = &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: pick(r, "cfg", "Bad_Name", "")}}
		case 2:
			e.SecretRef = &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}
		case 3:
			e.ConfigMapRef = &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}
			e.SecretRef = &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}
		}
		p.Spec.Containers[0].EnvFrom = append(p.Spec.Containers[0].EnvFrom, e)
	},
	func(r *rand.Rand, p *corev1.Pod) {
		c := corev1.Container{Name: "sidecar-init", Image: "busybox", RestartPolicy: ptr(pick(r, corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyNever, corev1.ContainerRestartPolicyOnFailure, "Sometimes")),
			ReadinessProbe: pick(r, nil, &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9000)}}, SuccessThreshold: pick[int32](r, 0, 2)}),
			Lifecycle:      pick(r, nil, &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: pick[int64](r, 5, -1, 100)}}})}
		if maybe(r, 0.3) {
			c.RestartPolicyRules = []corev1.ContainerRestartRule{{Action: pick[corev1.ContainerRestartRuleAction](r, "Restart", "Bogus"),
				ExitCodes: pick(r, nil, &corev1.ContainerRestartRuleOnExitCodes{Operator: pick[corev1.ContainerRestartRuleOnExitCodesOperator](r, "In", "Bogus"), Values: []int32{42}})}}
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	},
	func(r *rand.Rand, p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.RestartPolicy = ptr(pick(r, corev1.ContainerRestartPolicyNever, "Bogus", corev1.ContainerRestartPolicyAlways))
		if maybe(r, 0.5) {
			c.RestartPolicyRules = []corev1.ContainerRestartRule{{Action: "Restart", ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: "NotIn", Values: []int32{0}}}}
		}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		sc := &corev1.SecurityContext{}
		switch r.Intn(4) {
		case 0:
			sc.SeccompProfile = &corev1.SeccompProfile{Type: pick[corev1.SeccompProfileType](r, "", "Bogus", corev1.SeccompProfileTypeLocalhost, corev1.SeccompProfileTypeRuntimeDefault),
				LocalhostProfile: pick(r, nil, ptr("profiles/a.json"), ptr("/abs.json"))}
		case 1:
			sc.ProcMount = ptr(pick[corev1.ProcMountType](r, corev1.DefaultProcMount, corev1.UnmaskedProcMount, "Bogus"))
		case 2:
			sc.AllowPrivilegeEscalation = ptr(false)
			sc.Capabilities = &corev1.Capabilities{Add: []corev1.Capability{pick[corev1.Capability](r, "NET_ADMIN", "CAP_SYS_ADMIN")}, Drop: []corev1.Capability{"ALL"}}
		case 3:
			sc.RunAsGroup = ptr(pick[int64](r, 0, -5))
			sc.RunAsNonRoot = ptr(true)
		}
		p.Spec.Containers[0].SecurityContext = sc
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.HostUsers = ptr(false)
		p.Spec.HostNetwork = maybe(r, 0.5)
		p.Spec.HostPID = maybe(r, 0.5)
		p.Spec.ShareProcessNamespace = ptr(maybe(r, 0.5))
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: pick(r, "regcred", "")}}
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: pick[corev1.PodConditionType](r, "example.com/ready", "bad gate!")}}
		p.Spec.PriorityClassName = pick(r, "", "high", "Bad_Class")
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Annotations = map[string]string{pick(r, "controller.kubernetes.io/pod-deletion-cost", "example.com/note", "bad key!"): pick(r, "10", "abc", "99999999999")}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: pick(r, "example.com/gate", "bad gate!")}}
		p.Spec.NodeName = pick(r, "", "node-1")
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.HostAliases = []corev1.HostAlias{{IP: pick(r, "10.1.2.3", "bad", "010.1.2.3", "fd00::1"), Hostnames: []string{pick(r, "db.local", "Bad_Host")}}}
		if maybe(r, 0.3) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/a"}, {Name: "example.com/a"}}
		}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		a := &corev1.Affinity{}
		switch r.Intn(3) {
		case 0:
			req := corev1.NodeSelectorRequirement{Key: pick(r, "zone", "bad key!", ""), Operator: pick[corev1.NodeSelectorOperator](r, "In", "Exists", "Gt", "Bogus"),
				Values: pick(r, nil, []string{"a"}, []string{"a", "b"}, []string{"bad value!"})}
			a.NodeAffinity = &corev1.NodeAffinity{}
			if maybe(r, 0.6) {
				a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
				if maybe(r, 0.8) {
					term := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req}}
					if maybe(r, 0.3) {
						term.MatchFields = []corev1.NodeSelectorRequirement{{Key: pick(r, "metadata.name", "spec.x"), Operator: pick[corev1.NodeSelectorOperator](r, "In", "Exists"), Values: []string{pick(r, "node-1", "Bad_Node")}}}
					}
					a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = []corev1.NodeSelectorTerm{term}
				}
			} else {
				a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{{Weight: pick[int32](r, 1, 0, 101, 50),
					Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req}}}}
			}
		case 1, 2:
			t := corev1.PodAffinityTerm{TopologyKey: pick(r, "kubernetes.io/hostname", "", "bad key!"),
				Namespaces: pick(r, nil, []string{"default"}, []string{"Bad_NS"})}
			if maybe(r, 0.8) {
				t.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": pick(r, "web", "bad value!")}}
				if maybe(r, 0.3) {
					t.LabelSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: pick[metav1.LabelSelectorOperator](r, "In", "Bogus"), Values: []string{"x"}}}
				}
			}
			if maybe(r, 0.4) {
				t.MatchLabelKeys = []string{pick(r, "app", "pod-template-hash", "bad key!")}
			}
			if maybe(r, 0.2) {
				t.MismatchLabelKeys = []string{pick(r, "app", "tenant")}
			}
			if maybe(r, 0.5) {
				a.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{t}}
			} else {
				a.PodAffinity = &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: pick[int32](r, 100, 0), PodAffinityTerm: t}}}
			}
		}
		p.Spec.Affinity = a
	},
	func(r *rand.Rand, p *corev1.Pod) {
		c := corev1.TopologySpreadConstraint{MaxSkew: pick[int32](r, 1, 0), TopologyKey: pick(r, "topology.kubernetes.io/zone", ""),
			WhenUnsatisfiable: pick[corev1.UnsatisfiableConstraintAction](r, corev1.DoNotSchedule, corev1.ScheduleAnyway, "Bogus"),
			MinDomains:        pick(r, nil, ptr[int32](2), ptr[int32](0)),
			NodeTaintsPolicy:  pick(r, nil, ptr(corev1.NodeInclusionPolicyHonor), ptr[corev1.NodeInclusionPolicy]("Bogus"))}
		if maybe(r, 0.8) {
			c.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
		}
		if maybe(r, 0.5) {
			c.MatchLabelKeys = []string{pick(r, "app", "pod-template-hash", "version")}
		}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{c}
		if maybe(r, 0.2) {
			p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
		}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		pr := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: pick[int32](r, 9090, 0, 70000)}},
			TerminationGracePeriodSeconds: pick(r, nil, ptr[int64](10), ptr[int64](0))}
		if maybe(r, 0.5) {
			p.Spec.Containers[0].ReadinessProbe = pr
		} else {
			p.Spec.Containers[0].LivenessProbe = pr
		}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{}, HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/sub",
			SubPath: pick(r, "", "logs", "/abs", "../up"), SubPathExpr: pick(r, "", "$(POD_NAME)")})
		if len(p.Spec.Volumes) == 0 {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		rr := &p.Spec.Containers[0].Resources
		*rr = corev1.ResourceRequirements{} // one resource fault per pod: see below
		// One name: requests default from limits, and two wrong entries
		// of one map come out in Go's map order.
		name := corev1.ResourceName(pick(r, "example.com/gpu", "hugepages-2Mi", "nvidia.com/gpu", "kubernetes.io/bogus", "example.com/a_b"))
		rr.Limits = corev1.ResourceList{name: resource.MustParse(pick(r, "1", "500m", "2Mi"))}
		if maybe(r, 0.5) {
			rr.Requests = corev1.ResourceList{name: resource.MustParse(pick(r, "1", "2", "4Mi"))}
		}
		if maybe(r, 0.3) {
			rr.Limits, rr.Requests = nil, corev1.ResourceList{name: resource.MustParse("2Mi")}
		}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "REF", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: pick(r, "", "v1", "v2"), FieldPath: pick(r, "", "metadata.annotations['Example.com/A']", "metadata.labels['bad key!']", "spec.host", "status.phase", "metadata.name['x']")}}})
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "RES", ValueFrom: &corev1.EnvVarSource{
			ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: pick(r, "", "limits.cpu", "requests.memory", "limits.hugepages-2Mi"), Divisor: resource.MustParse(pick(r, "0", "1m", "2", "1Mi"))}}})
	},
	// Volumes of every source (see podvolumes.go).
	func(r *rand.Rand, p *corev1.Pod) { addVolumes(r, &p.Spec) },
	func(r *rand.Rand, p *corev1.Pod) { addVolumes(r, &p.Spec) },
}

func randFaultyPod(r *rand.Rand) *corev1.Pod {
	p := validPod(r)
	for i, n := 0, r.Intn(3); i < n && len(p.Spec.Containers) > 0; i++ {
		podFaults[r.Intn(len(podFaults))](r, p)
	}
	if maybe(r, 0.2) {
		addVolumes(r, &p.Spec)
	}
	// What draws warnings (see podwarnings.go).
	if maybe(r, 0.4) {
		addPodWarnings(r, &p.Spec, &p.ObjectMeta)
	}
	// Seccomp and AppArmor annotations and fields (see podsecurity.go).
	if maybe(r, 0.25) {
		addSecurityAnnotations(r, &p.Spec, &p.ObjectMeta)
	}
	if maybe(r, 0.1) {
		p.Name = pick(r, "web.0", "a.b.c", strings.Repeat("w", 64), "web-0")
	}
	return p
}

func podCreateCase(r *rand.Rand) string {
	return compareCreate(randFaultyPod(r), "", "pods", true, true, k8spod.Strategy, core.NewPodStrategy(),
		func() runtime.Object { return &api.Pod{} }, func() runtime.Object { return &corev1.Pod{} })
}

// storedPod is a valid pod as the store holds it: defaulted, created.
func storedPod(r *rand.Rand) *corev1.Pod {
	p := validPod(r)
	p.UID, p.ResourceVersion, p.Generation = "uid-7", "12", 1
	if maybe(r, 0.3) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "node-role", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr[int64](30)}}
	}
	if maybe(r, 0.3) {
		p.Spec.ActiveDeadlineSeconds = ptr[int64](600)
	}
	if maybe(r, 0.3) {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/a"}, {Name: "example.com/b"}}
		p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	} else if maybe(r, 0.3) {
		p.Spec.NodeName = "node-1"
	}
	if maybe(r, 0.2) {
		p.Annotations = map[string]string{"kubernetes.io/config.mirror": "abc"}
	}
	if maybe(r, 0.1) {
		p.Spec.TerminationGracePeriodSeconds = ptr[int64](-5)
	}
	if maybe(r, 0.15) {
		addStoredVolumes(r, &p.Spec)
	}
	legacyscheme.Scheme.Default(p)
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.5", PodIPs: []corev1.PodIP{{IP: "10.244.1.5"}}}
	return p
}

// podUpdates change one or two things of a stored pod, allowed or not.
var podUpdates = []func(r *rand.Rand, p *corev1.Pod){
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Containers[0].Image = pick(r, "nginx:1.26", "", " nginx", "nginx")
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.ActiveDeadlineSeconds = pick(r, nil, ptr[int64](300), ptr[int64](900), ptr[int64](-1), ptr[int64](0))
	},
	func(r *rand.Rand, p *corev1.Pod) {
		switch r.Intn(4) {
		case 0:
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: pick(r, "extra", "bad key!"), Operator: corev1.TolerationOpExists})
		case 1:
			p.Spec.Tolerations = nil
		case 2:
			if len(p.Spec.Tolerations) > 0 {
				p.Spec.Tolerations[0].TolerationSeconds = ptr[int64](60)
			}
		case 3:
			if len(p.Spec.Tolerations) > 0 {
				p.Spec.Tolerations[0].Key = "other"
			}
		}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		switch r.Intn(3) {
		case 0:
			p.Spec.SchedulingGates = nil
		case 1:
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: "example.com/new"})
		case 2:
			if len(p.Spec.SchedulingGates) > 0 {
				p.Spec.SchedulingGates = p.Spec.SchedulingGates[1:]
			}
		}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		switch r.Intn(3) {
		case 0:
			p.Spec.NodeSelector = map[string]string{"disk": "ssd", "zone": "a"}
		case 1:
			p.Spec.NodeSelector = map[string]string{"disk": "hdd"}
		case 2:
			p.Spec.NodeSelector = nil
		}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "extra", Image: "busybox"})
		legacyscheme.Scheme.Default(p)
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "NEW", Value: "1"}}
	},
	func(r *rand.Rand, p *corev1.Pod) { p.Spec.NodeName = pick(r, "", "node-2") },
	func(r *rand.Rand, p *corev1.Pod) {
		p.Labels = map[string]string{"app": pick(r, "web2", "bad value!")}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		switch r.Intn(3) {
		case 0:
			p.Annotations["kubernetes.io/config.mirror"] = "changed"
		case 1:
			delete(p.Annotations, "kubernetes.io/config.mirror")
		case 2:
			p.Annotations["controller.kubernetes.io/pod-deletion-cost"] = pick(r, "5", "x")
		}
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Spec.TerminationGracePeriodSeconds = pick(r, ptr[int64](1), ptr[int64](10), ptr[int64](-1))
	},
	func(r *rand.Rand, p *corev1.Pod) {
		p.Status.Phase = corev1.PodSucceeded
		p.Spec.RestartPolicy = pick(r, corev1.RestartPolicyNever, "Bogus")
	},
	func(r *rand.Rand, p *corev1.Pod) { changeVolumes(r, &p.Spec) },
}

func podUpdateCase(r *rand.Rand) string {
	old := storedPod(r)
	// Some cases are /status writes, compared on their warnings only.
	if maybe(r, 0.25) {
		return podStatusWarningsCase(r, old)
	}
	in := old.DeepCopy()
	for i, n := 0, 1+r.Intn(2); i < n; i++ {
		podUpdates[r.Intn(len(podUpdates))](r, in)
	}
	return withInput(compareUpdate(in, old, "", "pods", "", true, k8spod.Strategy, core.NewPodStrategy(),
		func() (runtime.Object, runtime.Object) { return &api.Pod{}, &api.Pod{} },
		func() runtime.Object { return &corev1.Pod{} }), in, old)
}

// deploymentPodCase is a Deployment whose pod template is one of the
// faulty pods: the template path of the same pod validation (a template's
// host-network ports may be 0, its annotations are checked as a pod's).
func deploymentPodCase(r *rand.Rand) string {
	p := randFaultyPod(r)
	if maybe(r, 0.2) {
		addAppArmorAnnotations(r, &p.Spec, &p.ObjectMeta)
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: p.Annotations}, Spec: p.Spec},
		},
	}
	return compareAppsCreate(d, "deployments", k8sdeployment.Strategy, core.NewDeploymentStrategy(),
		func() runtime.Object { return &apps.Deployment{} }, func() runtime.Object { return &appsv1.Deployment{} })
}

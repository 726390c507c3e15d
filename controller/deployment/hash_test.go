package deployment

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/davecgh/go-spew/spew"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
)

// seedTemplate is the seed's myapp template as kube-apiserver 1.36 stores
// it in a Deployment: SetDefaults_PodSpec and SetDefaults_Container applied,
// no enableServiceLinks (that default is Pod-only).
func seedTemplate() *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "myapp"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:                     "myapp",
				Image:                    "jocatalin/kubernetes-bootcamp:v1",
				Ports:                    []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				TerminationMessagePath:   corev1.TerminationMessagePathDefault,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy:          corev1.PullIfNotPresent,
			}},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			DNSPolicy:                     corev1.DNSClusterFirst,
			SecurityContext:               &corev1.PodSecurityContext{},
			SchedulerName:                 corev1.DefaultSchedulerName,
		},
	}
}

// TestPodTemplateHashAlgorithm recomputes the hash the way Kubernetes'
// ComputeHash/DeepHashObject define it, step by step, and checks the dump
// format those steps rely on (spew's %#v: type-annotated, inline, sorted
// map keys).
func TestPodTemplateHashAlgorithm(t *testing.T) {
	tmpl := seedTemplate()
	cfg := spew.ConfigState{Indent: " ", SortKeys: true, DisableMethods: true, SpewKeys: true}
	dump := cfg.Sprintf("%#v", *tmpl)
	for _, want := range []string{
		"(v1.PodTemplateSpec){ObjectMeta:(v1.ObjectMeta){Name:(string) GenerateName:(string) ",
		"Labels:(map[string]string)map[app:myapp] Annotations:(map[string]string)<nil>",
		"TerminationGracePeriodSeconds:(*int64)30 ",
		"EnableServiceLinks:(*bool)<nil> ",
	} {
		if !strings.Contains(dump, want) {
			t.Fatalf("spew dump lacks %q:\n%s", want, dump)
		}
	}
	want := func(cc *int32) string {
		h := fnv.New32a()
		h.Write([]byte(dump))
		if cc != nil {
			b := make([]byte, 8)
			binary.LittleEndian.PutUint32(b, uint32(*cc))
			h.Write(b)
		}
		return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
	}
	for _, cc := range []*int32{nil, ptr.To[int32](0), ptr.To[int32](1), ptr.To[int32](7)} {
		if got, w := PodTemplateHash(tmpl, cc), want(cc); got != w {
			t.Errorf("collisionCount %v: hash %q, want %q", cc, got, w)
		}
	}
	// A collision count of 0 still changes the hash (8 zero bytes are
	// written), as in Kubernetes.
	if PodTemplateHash(tmpl, nil) == PodTemplateHash(tmpl, ptr.To[int32](0)) {
		t.Error("collisionCount 0 must differ from nil")
	}
	// Regression pin for k8s.io/api v0.37.2: the seed's myapp template hashes
	// to this value (the seed's own "b9744c975" came from an older API level
	// whose types dump differently).
	if got := PodTemplateHash(tmpl, nil); got != pinnedSeedHash {
		t.Errorf("seed template hash = %q, pinned %q", got, pinnedSeedHash)
	}
}

// TestPodTemplateHashSensitivity: every field of the stored template counts,
// including nil versus empty and the Pod-only enableServiceLinks default.
func TestPodTemplateHashSensitivity(t *testing.T) {
	base := PodTemplateHash(seedTemplate(), nil)
	for name, mut := range map[string]func(*corev1.PodTemplateSpec){
		"image":              func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Image = "x:v2" },
		"label":              func(p *corev1.PodTemplateSpec) { p.Labels["version"] = "v2" },
		"enableServiceLinks": func(p *corev1.PodTemplateSpec) { p.Spec.EnableServiceLinks = ptr.To(true) },
		"empty annotations":  func(p *corev1.PodTemplateSpec) { p.Annotations = map[string]string{} },
	} {
		p := seedTemplate()
		mut(p)
		if PodTemplateHash(p, nil) == base {
			t.Errorf("%s: hash unchanged", name)
		}
	}
	if PodTemplateHash(seedTemplate(), nil) != base {
		t.Error("hash not deterministic")
	}
}

const pinnedSeedHash = "57c8d76cb6"

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/plugin/pkg/admission/defaulttolerationseconds"
	"k8s.io/kubernetes/plugin/pkg/admission/priority"
	"k8s.io/kubernetes/plugin/pkg/admission/serviceaccount"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
)

// Pod admission: kube-apiserver's ServiceAccount, Priority (with the two
// PriorityClasses kube-apiserver creates at start) and
// DefaultTolerationSeconds plugins, in kube-apiserver's order, against
// svcnet's core.PodAdmission installed as the pod strategy's Admit hook (as
// svcnet's API server installs it), on create and on update.
//
// Each case has its own service accounts (saWorld): kube's plugin reads them
// through its informer's lister (whose indexer the case fills; the informer
// is never started) and, on a miss, through a fake clientset whose get
// reactor serves the case's service accounts; svcnet's getter serves the
// same ones. A service account may be in the cache and the server, only in
// the server (a cache that lags), appear at the k-th direct lookup (the
// service account controller creating "default" while the plugin retries),
// fail to be read, or be missing.

var kubeAdmission struct {
	once    sync.Once
	plugins []admission.Interface
	saCache cache.Indexer
	world   *saWorld // the current case's service accounts
}

func kubePodAdmission() []admission.Interface {
	kubeAdmission.once.Do(func() {
		policy := corev1.PreemptLowerPriority
		client := fake.NewSimpleClientset(
			&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-node-critical"}, Value: 2000001000, PreemptionPolicy: &policy},
			&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-cluster-critical"}, Value: 2000000000, PreemptionPolicy: &policy})
		f := informers.NewSharedInformerFactory(client, 0)
		p := priority.NewPlugin()
		p.SetExternalKubeClientSet(client)
		p.SetExternalKubeInformerFactory(f)
		if err := p.ValidateInitialization(); err != nil {
			panic(err)
		}
		f.Start(nil)
		f.WaitForCacheSync(nil)
		dts := defaulttolerationseconds.NewDefaultTolerationSeconds()
		dts.InspectFeatureGates(utilfeature.DefaultFeatureGate) // as the admission initializer does
		if err := dts.ValidateInitialization(); err != nil {
			panic(err)
		}

		// The ServiceAccount plugin: its own clientset, whose gets are the
		// current case's, and an informer factory it takes its lister from.
		saClient := fake.NewSimpleClientset()
		saClient.PrependReactor("get", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
			get := a.(k8stesting.GetAction)
			sa, err := kubeAdmission.world.get(get.GetNamespace(), get.GetName(), kubeAdmission.world.kGets)
			if err != nil {
				return true, nil, err
			}
			return true, sa, nil
		})
		saFactory := informers.NewSharedInformerFactory(saClient, 0)
		sa := serviceaccount.NewServiceAccount()
		sa.SetExternalKubeClientSet(saClient)
		sa.SetExternalKubeInformerFactory(saFactory)
		if err := sa.ValidateInitialization(); err != nil {
			panic(err)
		}
		kubeAdmission.saCache = saFactory.Core().V1().ServiceAccounts().Informer().GetIndexer()

		// kube-apiserver's order (pkg/kubeapiserver/options.AllOrderedPlugins).
		kubeAdmission.plugins = []admission.Interface{sa, p, dts}
	})
	return kubeAdmission.plugins
}

// saMode is where a service account can be found.
type saMode int

const (
	saPresent  saMode = iota // in the informer's cache and on the server
	saLiveOnly               // on the server only (the cache lags)
	saLate                   // on the server from the lateAt-th direct lookup on
	saFailing                // reading it fails (not with NotFound)
)

type saEntry struct {
	sa     *corev1.ServiceAccount
	mode   saMode
	lateAt int
}

// saWorld is one case's service accounts (namespace "default"), with the
// direct lookups each side made.
type saWorld struct {
	entries      map[string]*saEntry
	kGets, sGets map[string]int
}

// get is a direct lookup (kube's client, svcnet's getter).
func (w *saWorld) get(ns, name string, gets map[string]int) (*corev1.ServiceAccount, error) {
	gets[name]++
	e := w.entries[name]
	if ns != namespace || e == nil || e.mode == saLate && gets[name] < e.lateAt {
		return nil, apierrors.NewNotFound(corev1.Resource("serviceaccounts"), name)
	}
	if e.mode == saFailing {
		return nil, apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0)
	}
	return e.sa.DeepCopy(), nil
}

// install makes w the current case's service accounts on kube's side.
func (w *saWorld) install() {
	kubePodAdmission()
	kubeAdmission.world = w
	var cached []any
	for _, e := range w.entries {
		if e.mode == saPresent {
			cached = append(cached, e.sa.DeepCopy())
		}
	}
	if err := kubeAdmission.saCache.Replace(cached, ""); err != nil {
		panic(err)
	}
	w.kGets, w.sGets = map[string]int{}, map[string]int{}
}

func (w *saWorld) describe() string {
	var out []string
	for _, name := range []string{"default", "builder", "robot"} {
		e := w.entries[name]
		if e == nil {
			out = append(out, name+": missing")
			continue
		}
		mode := [...]string{"present", "server only", "late", "failing"}[e.mode]
		if e.mode == saLate {
			mode += fmt.Sprintf(" (from lookup %d)", e.lateAt)
		}
		b := mustJSON(e.sa)
		out = append(out, fmt.Sprintf("%s: %s %s", name, mode, b))
	}
	return strings.Join(out, "; ")
}

// randSAWorld: "default", "builder" and "robot" (never "missing"). A
// missing "default" (or one found only at the 10th lookup) costs kube's
// plugin nine sleeps of 100-200 ms: rare.
func randSAWorld(r *rand.Rand, forUpdate bool) *saWorld {
	w := &saWorld{entries: map[string]*saEntry{}}
	for _, name := range []string{"default", "builder", "robot"} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("uid-sa-" + name), ResourceVersion: "3"}}
		sa.AutomountServiceAccountToken = pick(r, nil, nil, ptr(true), ptr(false))
		if maybe(r, 0.4) {
			for _, s := range r.Perm(2)[:1+r.Intn(2)] {
				sa.Secrets = append(sa.Secrets, corev1.ObjectReference{Name: []string{"s1", "s2"}[s]})
			}
		}
		if maybe(r, 0.4) {
			for _, s := range r.Perm(2)[:1+r.Intn(2)] {
				sa.ImagePullSecrets = append(sa.ImagePullSecrets, corev1.LocalObjectReference{Name: []string{"pull1", "pull2"}[s]})
			}
		}
		if maybe(r, 0.4) {
			sa.Annotations = map[string]string{serviceaccount.EnforceMountableSecretsAnnotation: pick(r, "true", "true", "true", "false", "1", "yes", "TRUE")}
		}
		e := &saEntry{sa: sa}
		if !forUpdate {
			x := r.Float64()
			if name == "default" {
				switch {
				case x < 0.0007:
					e = nil
				case x < 0.0014:
					e.mode, e.lateAt = saLate, 10
				case x < 0.0034:
					e.mode, e.lateAt = saLate, pick(r, 2, 3)
				case x < 0.0134:
					e.mode = saFailing
				case x < 0.0634:
					e.mode = saLiveOnly
				}
			} else {
				switch {
				case x < 0.15:
					e = nil
				case x < 0.2:
					e.mode, e.lateAt = saLate, 2
				case x < 0.23:
					e.mode = saFailing
				case x < 0.33:
					e.mode = saLiveOnly
				}
			}
		}
		if e != nil {
			w.entries[name] = e
		}
	}
	return w
}

// admissionPod is a pod with the fields the three plugins read.
func admissionPod(r *rand.Rand) *corev1.Pod {
	p := validPod(r)
	p.Spec.PriorityClassName = pick(r, "", "", "system-node-critical", "system-cluster-critical", "gold")
	if maybe(r, 0.25) {
		p.Spec.Priority = ptr(pick[int32](r, 0, 5, 2000001000, 2000000000))
	}
	if maybe(r, 0.2) {
		p.Spec.PreemptionPolicy = ptr(pick(r, corev1.PreemptLowerPriority, corev1.PreemptNever))
	}
	p.Spec.Tolerations = nil
	for _, t := range []corev1.Toleration{
		{Operator: corev1.TolerationOpExists},
		{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr[int64](10)},
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists},
		{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoExecute},
	} {
		if maybe(r, 0.15) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, t)
		}
	}
	addServiceAccountFields(r, p)
	return p
}

// Secret names pods reference: "s1"/"s2" are what service accounts list
// (sometimes), "other" never; "" is skipped by kube's secret visitor.
func secretName(r *rand.Rand) string { return pick(r, "s1", "s2", "other", "s1", "s2", "other", "") }

// secretVolumeSources are the volume plugins whose secret references kube's
// VisitPodSecretNames sees, with and without a secret.
func secretVolumeSource(r *rand.Rand) corev1.VolumeSource {
	ref := pick(r, nil, &corev1.LocalObjectReference{Name: secretName(r)})
	switch r.Intn(10) {
	case 0:
		return corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{SecretName: pick(r, "", "az"), ShareName: "share"}}
	case 1:
		return corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{Monitors: []string{"10.0.0.1"}, SecretRef: ref}}
	case 2:
		return corev1.VolumeSource{Cinder: &corev1.CinderVolumeSource{VolumeID: "v", SecretRef: ref}}
	case 3:
		return corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{Driver: "example.com/flex", SecretRef: ref}}
	case 4:
		return corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{CephMonitors: []string{"10.0.0.1"}, RBDImage: "img", SecretRef: ref}}
	case 5:
		return corev1.VolumeSource{ScaleIO: &corev1.ScaleIOVolumeSource{Gateway: "gw", System: "sys", SecretRef: ref}}
	case 6:
		return corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "10.0.0.1:3260", IQN: "iqn.2001-04.com.example:storage", SecretRef: ref}}
	case 7:
		return corev1.VolumeSource{StorageOS: &corev1.StorageOSVolumeSource{VolumeName: "v", SecretRef: ref}}
	case 8:
		return corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "csi.example.com", NodePublishSecretRef: ref}}
	default:
		return corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secretName(r)}}
	}
}

// addServiceAccountFields adds what the ServiceAccount plugin reads: the
// service account name, automountServiceAccountToken, token volumes and
// mounts already there, secret references of every kind, image pull
// secrets, mirror pods.
func addServiceAccountFields(r *rand.Rand, p *corev1.Pod) {
	p.Spec.ServiceAccountName = pick(r, "", "", "", "default", "builder", "robot", "missing")
	if maybe(r, 0.1) {
		p.Spec.DeprecatedServiceAccount = pick(r, "builder", "default", "missing")
	}
	p.Spec.AutomountServiceAccountToken = pick(r, nil, nil, ptr(true), ptr(false))
	switch x := r.Float64(); {
	case x < 0.05:
		p.Name, p.GenerateName = "", "web-"
	case x < 0.06:
		p.Name = ""
	}
	mirror := maybe(r, 0.12)
	if mirror {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[corev1.MirrorPodAnnotationKey] = pick(r, "0f1e2d3c", "")
		if maybe(r, 0.6) {
			p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount = "", ""
		}
	}
	if maybe(r, 0.25) {
		c := corev1.Container{Name: "init", Image: "busybox", Command: []string{"true"}}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
	addVolume := func(v corev1.Volume) {
		for _, o := range p.Spec.Volumes {
			if o.Name == v.Name {
				return
			}
		}
		p.Spec.Volumes = append(p.Spec.Volumes, v)
	}
	// A token volume the pod brings (the plugin reuses its name).
	tokenVol := ""
	if maybe(r, 0.12) {
		tokenVol = pick(r, "kube-api-access-mine1", "kube-api-access-x", "kube-api-access-")
		src := pick(r, corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
			corev1.VolumeSource{Projected: core.TokenVolumeSource()})
		addVolume(corev1.Volume{Name: tokenVol, VolumeSource: src})
	}
	if maybe(r, 0.03) {
		// A volume merely named like the prefix.
		addVolume(corev1.Volume{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	for i, n := 0, pick(r, 0, 0, 0, 1, 1, 2); i < n; i++ {
		var src corev1.VolumeSource
		switch r.Intn(5) {
		case 0, 1:
			src = corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secretName(r)}}
		case 2:
			src = secretVolumeSource(r)
		case 3:
			proj := &corev1.ProjectedVolumeSource{}
			if maybe(r, 0.6) {
				proj.Sources = append(proj.Sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: secretName(r)}}})
			}
			if maybe(r, 0.5) {
				proj.Sources = append(proj.Sources, corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "vault", Path: "vault-token"}})
			}
			if maybe(r, 0.3) {
				proj.Sources = append(proj.Sources, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}})
			}
			src = corev1.VolumeSource{Projected: proj}
		case 4:
			src = corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}
		}
		addVolume(corev1.Volume{Name: fmt.Sprintf("vol-%d", i), VolumeSource: src})
	}
	containers := func(f func(c *corev1.Container)) {
		for i := range p.Spec.InitContainers {
			f(&p.Spec.InitContainers[i])
		}
		for i := range p.Spec.Containers {
			f(&p.Spec.Containers[i])
		}
	}
	containers(func(c *corev1.Container) {
		if maybe(r, 0.15) {
			// Something of its own at the token path.
			vol := "token-override"
			if tokenVol != "" && maybe(r, 0.5) {
				vol = tokenVol
			} else {
				addVolume(corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			}
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: core.ServiceAccountTokenMountPath, ReadOnly: maybe(r, 0.5)})
		} else if tokenVol != "" && maybe(r, 0.2) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: tokenVol, MountPath: "/token"})
		}
		if maybe(r, 0.15) {
			c.Env = append(c.Env, corev1.EnvVar{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secretName(r)}, Key: "password"}}})
		}
		if maybe(r, 0.05) {
			c.Env = append(c.Env, corev1.EnvVar{Name: "LEVEL", ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "level"}}})
		}
		if maybe(r, 0.1) {
			c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: secretName(r)}}})
		}
		if maybe(r, 0.05) {
			c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}})
		}
	})
	if maybe(r, 0.03) {
		ec := corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}
		if maybe(r, 0.5) {
			ec.Env = []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secretName(r)}, Key: "password"}}}}
		} else {
			ec.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: secretName(r)}}}}
		}
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, ec)
	}
	if maybe(r, 0.25) {
		for i, n := 0, 1+r.Intn(2); i < n; i++ {
			p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: pick(r, "pull1", "pull2", "other-pull", "s1", "")})
		}
	}
}

// admitBoth runs in (and old, on update) through both, with w's service
// accounts, and returns the versioned results and errors.
func admitBoth(in, old *corev1.Pod, w *saWorld) (kOut, sOut *corev1.Pod, kErr, sErr error) {
	w.install()
	// kube-apiserver's create handler names the attributes after the
	// object (empty with generateName).
	ctx := requestCtx("create", "", "v1", "pods", "", in.Name)
	op := admission.Create
	var kOld *api.Pod
	var opts runtime.Object = &metav1.CreateOptions{}
	if old != nil {
		ctx = requestCtx("update", "", "v1", "pods", "", in.Name)
		op = admission.Update
		kOld = &api.Pod{}
		toInternal(old, kOld)
		opts = &metav1.UpdateOptions{}
	}
	kv := in.DeepCopy()
	legacyscheme.Scheme.Default(kv)
	ki := &api.Pod{}
	toInternal(kv, ki)
	var oldObj runtime.Object
	if kOld != nil {
		oldObj = kOld
	}
	attrs := admission.NewAttributesRecord(ki, oldObj, api.Kind("Pod").WithVersion("v1"), namespace, in.Name,
		api.Resource("pods").WithVersion("v1"), "", op, opts, false, nil)
	// The mutating chain, then the validating one, as kube-apiserver's
	// admission chain runs them.
	plugins := kubePodAdmission()
	for _, p := range plugins {
		if m, ok := p.(admission.MutationInterface); ok && p.Handles(op) && kErr == nil {
			kErr = m.Admit(context.Background(), attrs, nil)
		}
	}
	for _, p := range plugins {
		if v, ok := p.(admission.ValidationInterface); ok && p.Handles(op) && kErr == nil {
			kErr = v.Validate(context.Background(), attrs, nil)
		}
	}
	kOut = &corev1.Pod{}
	toInternal(ki, kOut)

	adm := &core.PodAdmission{
		Disabled: map[string]bool{},
		ServiceAccounts: func(_ context.Context, ns, name string) (*corev1.ServiceAccount, error) {
			return w.get(ns, name, w.sGets)
		},
		Sleep: func(time.Duration) {},
	}
	st := core.NewPodStrategy()
	core.BasicOf(st).Admit = adm.Admit // as svcnet's API server installs it
	sv := in.DeepCopy()
	st.Default(sv)
	if old != nil {
		_, sErr = st.(registry.UpdateAllocator).BeginUpdate(ctx, sv, old.DeepCopy(), false)
	} else {
		_, sErr = st.(registry.CreateAllocator).BeginCreate(ctx, sv, false)
	}
	return kOut, sv, kErr, sErr
}

// errDesc is what a client sees of an admission error: the Status's code,
// reason, message and details.
func errDesc(err error) string {
	if err == nil {
		return ""
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return fmt.Sprintf("(not a Status: %T) %s", err, err)
	}
	s := st.Status()
	out := fmt.Sprintf("%d %s: %s", s.Code, s.Reason, s.Message)
	if d := s.Details; d != nil {
		out += fmt.Sprintf(" [details: name=%q group=%q kind=%q causes=%v retryAfter=%d]", d.Name, d.Group, d.Kind, d.Causes, d.RetryAfterSeconds)
	}
	if _, direct := err.(apierrors.APIStatus); !direct {
		out = fmt.Sprintf("(wrapped %T) ", err) + out
	}
	return out
}

var generatedSuffix = regexp.MustCompile(`^kube-api-access-[a-z0-9]{5}$`)

// maskTokenVolume replaces the generated token volume's name (a name with
// the kube-api-access- prefix that in does not use) in out by
// kube-api-access-<random> and returns the generated names.
func maskTokenVolume(in, out *corev1.Pod) []string {
	const prefix = serviceaccount.ServiceAccountVolumeName + "-"
	known := map[string]bool{}
	for _, v := range in.Spec.Volumes {
		known[v.Name] = true
	}
	for _, cs := range [][]corev1.Container{in.Spec.InitContainers, in.Spec.Containers} {
		for _, c := range cs {
			for _, m := range c.VolumeMounts {
				known[m.Name] = true
			}
		}
	}
	var gen []string
	mask := func(name *string) {
		if !strings.HasPrefix(*name, prefix) || known[*name] {
			return
		}
		seen := false
		for _, g := range gen {
			seen = seen || g == *name
		}
		if !seen {
			gen = append(gen, *name)
		}
		*name = prefix + "<random>"
	}
	for i := range out.Spec.Volumes {
		mask(&out.Spec.Volumes[i].Name)
	}
	for _, cs := range [][]corev1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range cs {
			for j := range cs[i].VolumeMounts {
				mask(&cs[i].VolumeMounts[j].Name)
			}
		}
	}
	return gen
}

// checkGenerated: at most one generated name, prefix and five characters
// of [a-z0-9].
func checkGenerated(side string, gen []string) string {
	if len(gen) > 1 {
		return fmt.Sprintf("%s generated token volume names differ: %v", side, gen)
	}
	if len(gen) == 1 && !generatedSuffix.MatchString(gen[0]) {
		return fmt.Sprintf("%s generated token volume name %q is not kube-api-access- and 5 characters of [a-z0-9]", side, gen[0])
	}
	return ""
}

func compareAdmitted(in, k, s *corev1.Pod) string {
	kGen, sGen := maskTokenVolume(in, k), maskTokenVolume(in, s)
	return joinDiffs(checkGenerated("kubernetes", kGen), checkGenerated("svcnet", sGen), compareObjs("admitted", k, s))
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func podAdmissionCreateCase(r *rand.Rand) string {
	in := admissionPod(r)
	w := randSAWorld(r, false)
	k, s, kErr, sErr := admitBoth(in, nil, w)
	diff := compareObjs("error", errDesc(kErr), errDesc(sErr))
	if kErr == nil && sErr == nil {
		diff = joinDiffs(diff, compareAdmitted(in, k, s))
	}
	if diff == "" {
		return ""
	}
	return withInput(diff, in) + "\n  service accounts: " + w.describe()
}

// podAdmissionUpdateCase: an admitted pod, then an update that may leave
// out or change the priority, the preemption policy, the tolerations or
// what the ServiceAccount plugin sets on create (which it leaves alone on
// update).
func podAdmissionUpdateCase(r *rand.Rand) string {
	base := admissionPod(r)
	base.Spec.Priority, base.Spec.PreemptionPolicy = nil, nil
	if base.Spec.PriorityClassName == "gold" {
		base.Spec.PriorityClassName = ""
	}
	w := randSAWorld(r, true)
	_, old, _, _ := admitBoth(base, nil, w)
	old.UID, old.ResourceVersion = "uid-7", "12"
	in := old.DeepCopy()
	switch r.Intn(4) {
	case 0:
		in.Spec.Priority = nil
	case 1:
		in.Spec.Priority = ptr[int32](7)
	case 2:
		in.Spec.PreemptionPolicy = nil
	}
	if maybe(r, 0.4) {
		in.Spec.Tolerations = nil
	}
	if maybe(r, 0.3) {
		switch r.Intn(5) {
		case 0:
			in.Spec.ServiceAccountName, in.Spec.DeprecatedServiceAccount = pick(r, "", "missing", "robot"), ""
		case 1:
			in.Spec.Volumes = nil
			for i := range in.Spec.Containers {
				in.Spec.Containers[i].VolumeMounts = nil
			}
		case 2:
			in.Spec.ImagePullSecrets = pick(r, nil, []corev1.LocalObjectReference{{Name: "other-pull"}})
		case 3:
			in.Spec.AutomountServiceAccountToken = ptr(true)
		case 4:
			if in.Annotations == nil {
				in.Annotations = map[string]string{}
			}
			in.Annotations[corev1.MirrorPodAnnotationKey] = "0f1e2d3c"
		}
	}
	k, s, kErr, sErr := admitBoth(in, old, w)
	diff := joinDiffs(compareObjs("error", errDesc(kErr), errDesc(sErr)), compareAdmitted(in, k, s))
	if diff == "" {
		return ""
	}
	return withInput(diff, in, old) + "\n  service accounts: " + w.describe()
}

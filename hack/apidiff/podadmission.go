package main

import (
	"context"
	"math/rand"
	"sync"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/plugin/pkg/admission/defaulttolerationseconds"
	"k8s.io/kubernetes/plugin/pkg/admission/priority"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
)

// Pod admission: kube-apiserver's DefaultTolerationSeconds and Priority
// plugins (with the two PriorityClasses kube-apiserver creates at start)
// against svcnet's pod strategy's Admit hook, on create and on update.

var kubeAdmission struct {
	once    sync.Once
	plugins []admission.MutationInterface
}

func kubePodAdmission() []admission.MutationInterface {
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
		kubeAdmission.plugins = []admission.MutationInterface{dts, p}
	})
	return kubeAdmission.plugins
}

// admissionPod is a pod with the fields the two plugins read.
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
	return p
}

// admitBoth runs in (and old, on update) through both and returns the
// versioned results and errors.
func admitBoth(in, old *corev1.Pod) (kOut, sOut *corev1.Pod, kErr, sErr string) {
	ctx := requestCtx("create", "", "v1", "pods", "", in.Name)
	op := admission.Create
	var kOld *api.Pod
	if old != nil {
		op = admission.Update
		kOld = &api.Pod{}
		toInternal(old, kOld)
	}
	kv := in.DeepCopy()
	legacyscheme.Scheme.Default(kv)
	ki := &api.Pod{}
	toInternal(kv, ki)
	attrs := admission.NewAttributesRecord(ki, nil, api.Kind("Pod").WithVersion("v1"), namespace, in.Name,
		api.Resource("pods").WithVersion("v1"), "", op, &metav1.CreateOptions{}, false, nil)
	if kOld != nil {
		attrs = admission.NewAttributesRecord(ki, kOld, api.Kind("Pod").WithVersion("v1"), namespace, in.Name,
			api.Resource("pods").WithVersion("v1"), "", op, &metav1.UpdateOptions{}, false, nil)
	}
	for _, p := range kubePodAdmission() {
		if err := p.Admit(context.Background(), attrs, nil); err != nil {
			kErr = err.Error()
			break
		}
	}
	kOut = &corev1.Pod{}
	toInternal(ki, kOut)

	st := core.NewPodStrategy()
	sv := in.DeepCopy()
	st.Default(sv)
	var err error
	if old != nil {
		_, err = st.(registry.UpdateAllocator).BeginUpdate(ctx, sv, old.DeepCopy(), false)
	} else {
		_, err = st.(registry.CreateAllocator).BeginCreate(ctx, sv, false)
	}
	if err != nil {
		sErr = err.Error()
	}
	return kOut, sv, kErr, sErr
}

func podAdmissionCreateCase(r *rand.Rand) string {
	in := admissionPod(r)
	k, s, kErr, sErr := admitBoth(in, nil)
	diff := compareObjs("error", kErr, sErr)
	if kErr == "" && sErr == "" {
		diff = joinDiffs(diff, compareObjs("admitted", k, s))
	}
	return withInput(diff, in)
}

// podAdmissionUpdateCase: an admitted pod, then an update that may leave
// out or change the priority, the preemption policy or the tolerations.
func podAdmissionUpdateCase(r *rand.Rand) string {
	base := admissionPod(r)
	base.Spec.Priority, base.Spec.PreemptionPolicy = nil, nil
	if base.Spec.PriorityClassName == "gold" {
		base.Spec.PriorityClassName = ""
	}
	_, old, _, _ := admitBoth(base, nil)
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
	k, s, kErr, sErr := admitBoth(in, old)
	return withInput(joinDiffs(compareObjs("error", kErr, sErr), compareObjs("admitted", k, s)), in, old)
}

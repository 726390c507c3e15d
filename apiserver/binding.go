package apiserver

import (
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// handleBinding serves POST pods/<name>/binding, the scheduler's way to
// assign a pod to a node, with kube-apiserver's rules: the target must be a
// node, a pod already assigned gets 409 Conflict, a pod being deleted cannot
// be bound, and the pod gets a PodScheduled=True condition.
func (s *Server) handleBinding(w http.ResponseWriter, r *http.Request, req request) error {
	out, err := negotiate(r, false)
	if err != nil {
		return err
	}
	p, err := parseWriteParams(r)
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	obj, err := decodeBody(r, body, &corev1.Binding{}, corev1.SchemeGroupVersion.WithKind("Binding"), p.strict)
	if err != nil {
		return err
	}
	b := obj.(*corev1.Binding)
	if b.Name == "" {
		b.Name = req.name
	}
	if b.Name != req.name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", b.Name, req.name))
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), b.Name, field.ErrorList{field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node", "<empty>"})})
	}
	if b.Target.Name == "" {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), b.Name, field.ErrorList{field.Required(field.NewPath("target", "name"), "")})
	}
	// As in kube-apiserver, binding writes storage directly: the pod update
	// strategy would reset status (and spec.nodeName is otherwise immutable).
	bind := func(cur runtime.Object) (runtime.Object, error) {
		pod := cur.(*corev1.Pod)
		if b.UID != "" && b.UID != pod.UID {
			return nil, apierrors.NewConflict(req.res.Info.GroupResource(), req.name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", b.UID, pod.UID))
		}
		if pod.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(req.res.Info.GroupResource(), req.name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", req.name))
		}
		if pod.Spec.NodeName != "" {
			return nil, apierrors.NewConflict(req.res.Info.GroupResource(), req.name, fmt.Errorf("pod %s is already assigned to node %q", req.name, pod.Spec.NodeName))
		}
		pod.Spec.NodeName = b.Target.Name
		for k, v := range b.Annotations {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
		cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}
		replaced := false
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == corev1.PodScheduled {
				pod.Status.Conditions[i], replaced = cond, true
			}
		}
		if !replaced {
			pod.Status.Conditions = append(pod.Status.Conditions, cond)
		}
		return pod, nil
	}
	if p.dryRun {
		cur, err := req.res.Get(r.Context(), req.namespace, req.name)
		if err == nil {
			_, err = bind(cur)
		}
		if err != nil {
			return err
		}
	} else if _, err := req.res.Storage.GuaranteedUpdate(r.Context(), req.res.Key(req.namespace, req.name), false, nil, bind); err != nil {
		return err
	}
	writeObject(w, out, http.StatusCreated, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated}, req.gv)
	return nil
}

package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/svcnet/svcnet/registry"
)

var autoscalingV1 = autoscalingv1.SchemeGroupVersion

// writeParams are the query parameters shared by create, update and patch.
type writeParams struct {
	dryRun  bool
	strict  bool
	manager string
	force   bool
}

func parseWriteParams(r *http.Request) (writeParams, error) {
	q := r.URL.Query()
	p := writeParams{manager: q.Get("fieldManager")}
	for _, d := range q["dryRun"] {
		if d != "All" {
			return p, apierrors.NewBadRequest(fmt.Sprintf("Invalid dry run value: %q", d))
		}
		p.dryRun = true
	}
	switch v := q.Get("fieldValidation"); v {
	case "", "Ignore", "Warn":
	case "Strict":
		p.strict = true
	default:
		return p, apierrors.NewBadRequest(fmt.Sprintf("fieldValidation parameter unsupported: %s", v))
	}
	if f := q.Get("force"); f != "" {
		p.force, _ = strconv.ParseBool(f)
	}
	if p.manager == "" {
		p.manager = registry.DefaultManager(r.UserAgent())
	}
	return p, nil
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request, req request) error {
	out, err := negotiate(r, req.res.isUnstructured())
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
	obj, err := decodeBody(r, body, req.res.Info.New(), req.res.Info.GVK(), p.strict)
	if err != nil {
		return err
	}
	created, err := req.res.Create(r.Context(), req.namespace, obj, registry.WriteOptions{DryRun: p.dryRun, FieldManager: p.manager})
	if err != nil {
		return err
	}
	warnOnCreate(w, r, req.res, created)
	return s.respond(w, r, out, http.StatusCreated, req, created)
}

func (s *Server) handleUpdate(w http.ResponseWriter, r *http.Request, req request) error {
	out, err := negotiate(r, req.res.isUnstructured())
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
	if req.sub == "scale" {
		sc, err := decodeBody(r, body, &autoscalingv1.Scale{}, autoscalingV1.WithKind("Scale"), p.strict)
		if err != nil {
			return err
		}
		return s.updateScale(w, r, out, req, p, func(*autoscalingv1.Scale) (*autoscalingv1.Scale, error) { return sc.(*autoscalingv1.Scale), nil })
	}
	obj, err := decodeBody(r, body, req.res.Info.New(), req.res.Info.GVK(), p.strict)
	if err != nil {
		return err
	}
	var warnings []string
	updated, created, err := req.res.Update(r.Context(), req.namespace, req.name, func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
		if cur == nil {
			return nil, apierrors.NewNotFound(req.res.Info.GroupResource(), req.name)
		}
		return obj.DeepCopyObject(), nil
	}, false, registry.WriteOptions{DryRun: p.dryRun, FieldManager: p.manager, Subresource: req.sub, Warnings: &warnings})
	if err != nil {
		return err
	}
	for _, msg := range warnings {
		addWarning(w, msg)
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	return s.respond(w, r, out, code, req, updated)
}

// patchTypes are the patch content types accepted, in kube-apiserver's order.
var patchTypes = []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.StrategicMergePatchType), string(types.ApplyYAMLPatchType)}

// applyPatch applies a json, merge or strategic-merge patch to cur's JSON.
func applyPatch(pt types.PatchType, curJSON, patch []byte, schemaObj runtime.Object) ([]byte, error) {
	switch pt {
	case types.JSONPatchType:
		jp, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		out, err := jp.Apply(curJSON)
		if err != nil {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
		return out, nil
	case types.MergePatchType:
		if !json.Valid(patch) {
			return nil, apierrors.NewBadRequest("error decoding patch: invalid JSON")
		}
		out, err := jsonpatch.MergePatch(curJSON, patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return out, nil
	case types.StrategicMergePatchType:
		if schemaObj == nil {
			return nil, unsupportedMediaType(string(pt), []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.ApplyYAMLPatchType)})
		}
		var pm map[string]any
		if err := json.Unmarshal(patch, &pm); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
		}
		out, err := strategicpatch.StrategicMergePatch(curJSON, patch, schemaObj)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return out, nil
	}
	return nil, unsupportedMediaType(string(pt), patchTypes)
}

func (s *Server) encodeJSON(obj runtime.Object, gv schema.GroupVersion) ([]byte, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.MarshalJSON()
	}
	info, _ := serializerFor(runtime.ContentTypeJSON)
	return runtime.Encode(Codecs.EncoderForVersion(info.Serializer, gv), obj)
}

func (s *Server) decodeJSON(data []byte, res *served, strict bool) (runtime.Object, error) {
	into := res.Info.New()
	if u, ok := into.(*unstructured.Unstructured); ok {
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return u, nil
	}
	info, _ := serializerFor(runtime.ContentTypeJSON)
	dec := info.Serializer
	if strict {
		dec = info.StrictSerializer
	}
	gvk := res.Info.GVK()
	obj, _, err := dec.Decode(data, &gvk, into)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, err))
	}
	return obj, nil
}

func (s *Server) handlePatch(w http.ResponseWriter, r *http.Request, req request) error {
	out, err := negotiate(r, req.res.isUnstructured())
	if err != nil {
		return err
	}
	p, err := parseWriteParams(r)
	if err != nil {
		return err
	}
	pt := types.PatchType(contentType(r))
	switch pt {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType, types.ApplyYAMLPatchType:
	default:
		return unsupportedMediaType(string(pt), patchTypes)
	}
	patch, err := readBody(r)
	if err != nil {
		return err
	}
	var schemaObj runtime.Object
	if !req.res.isUnstructured() {
		schemaObj = req.res.Info.New()
	}
	if req.sub == "scale" {
		if pt == types.ApplyYAMLPatchType {
			return unsupportedMediaType(string(pt), patchTypes[:3])
		}
		return s.updateScale(w, r, out, req, p, func(cur *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
			curJSON, err := json.Marshal(cur)
			if err != nil {
				return nil, err
			}
			nj, err := applyPatch(pt, curJSON, patch, &autoscalingv1.Scale{})
			if err != nil {
				return nil, err
			}
			var sc autoscalingv1.Scale
			if err := json.Unmarshal(nj, &sc); err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			return &sc, nil
		})
	}
	opts := registry.WriteOptions{DryRun: p.dryRun, FieldManager: p.manager, Subresource: req.sub}
	var compute registry.UpdateFunc
	allowCreate := false
	if pt == types.ApplyYAMLPatchType {
		if r.URL.Query().Get("fieldManager") == "" {
			return apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "PatchOptions"}, "", field.ErrorList{field.Required(field.NewPath("fieldManager"), "is required for apply patch")})
		}
		fm := req.res.FieldManagers[req.sub]
		if fm == nil {
			return unsupportedMediaType(string(pt), patchTypes[:3])
		}
		js, err := yaml.YAMLToJSON(patch)
		if err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
		}
		applied := &unstructured.Unstructured{}
		if err := applied.UnmarshalJSON(js); err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("error decoding apply patch: %v", err))
		}
		if p.strict {
			if _, err := s.decodeJSON(js, req.res, true); err != nil {
				return err
			}
		}
		if gvk := applied.GroupVersionKind(); gvk != req.res.Info.GVK() {
			return apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", applied.GetAPIVersion(), req.gv))
		}
		opts.SkipManagedFields = true
		allowCreate = req.sub == ""
		compute = func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			live := cur
			if live == nil {
				live = req.res.Info.New()
				acc, _ := meta.Accessor(live)
				acc.SetName(req.name)
				acc.SetNamespace(req.namespace)
			}
			obj, err := fm.Apply(live, applied.DeepCopy(), p.manager, p.force)
			if err != nil {
				return nil, err
			}
			return obj, nil
		}
	} else {
		compute = func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			if cur == nil {
				return nil, apierrors.NewNotFound(req.res.Info.GroupResource(), req.name)
			}
			curJSON, err := s.encodeJSON(cur, req.gv)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			nj, err := applyPatch(pt, curJSON, patch, schemaObj)
			if err != nil {
				return nil, err
			}
			return s.decodeJSON(nj, req.res, p.strict)
		}
	}
	var warnings []string
	opts.Warnings = &warnings
	updated, created, err := req.res.Update(r.Context(), req.namespace, req.name, compute, allowCreate, opts)
	if err != nil {
		return err
	}
	for _, msg := range warnings {
		addWarning(w, msg)
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	return s.respond(w, r, out, code, req, updated)
}

// scaleOf builds the autoscaling/v1 Scale of a deployment or replicaset.
func scaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	var om metav1.ObjectMeta
	var spec, status int32
	var sel *metav1.LabelSelector
	switch o := obj.(type) {
	case *appsv1.Deployment:
		om, status, sel = o.ObjectMeta, o.Status.Replicas, o.Spec.Selector
		if o.Spec.Replicas != nil {
			spec = *o.Spec.Replicas
		}
	case *appsv1.ReplicaSet:
		om, status, sel = o.ObjectMeta, o.Status.Replicas, o.Spec.Selector
		if o.Spec.Replicas != nil {
			spec = *o.Spec.Replicas
		}
	default:
		return nil, apierrors.NewInternalError(fmt.Errorf("no scale for %T", obj))
	}
	selector := ""
	if sel != nil {
		if s, err := metav1.LabelSelectorAsSelector(sel); err == nil {
			selector = s.String()
		}
	}
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{Name: om.Name, Namespace: om.Namespace, UID: om.UID,
			ResourceVersion: om.ResourceVersion, CreationTimestamp: om.CreationTimestamp},
		Spec:   autoscalingv1.ScaleSpec{Replicas: spec},
		Status: autoscalingv1.ScaleStatus{Replicas: status, Selector: selector},
	}, nil
}

func (s *Server) updateScale(w http.ResponseWriter, r *http.Request, out output, req request, p writeParams, next func(*autoscalingv1.Scale) (*autoscalingv1.Scale, error)) error {
	updated, _, err := req.res.Update(r.Context(), req.namespace, req.name, func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
		if cur == nil {
			return nil, apierrors.NewNotFound(req.res.Info.GroupResource(), req.name)
		}
		sc, err := scaleOf(cur)
		if err != nil {
			return nil, err
		}
		ns, err := next(sc)
		if err != nil {
			return nil, err
		}
		if ns.Spec.Replicas < 0 {
			return nil, apierrors.NewInvalid(schema.GroupKind{Group: "autoscaling", Kind: "Scale"}, req.name, field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), ns.Spec.Replicas, "must be greater than or equal to 0")})
		}
		obj := cur.DeepCopyObject()
		acc, _ := meta.Accessor(obj)
		if ns.ResourceVersion != "" {
			acc.SetResourceVersion(ns.ResourceVersion)
		}
		rep := ns.Spec.Replicas
		switch o := obj.(type) {
		case *appsv1.Deployment:
			o.Spec.Replicas = &rep
		case *appsv1.ReplicaSet:
			o.Spec.Replicas = &rep
		}
		return obj, nil
	}, false, registry.WriteOptions{DryRun: p.dryRun, FieldManager: p.manager})
	if err != nil {
		return err
	}
	sc, err := scaleOf(updated)
	if err != nil {
		return err
	}
	writeObject(w, out, http.StatusOK, sc, autoscalingV1)
	return nil
}

func parseDeleteOptions(r *http.Request) (registry.DeleteOptions, error) {
	var opts metav1.DeleteOptions
	body, err := readBody(r)
	if err != nil {
		return registry.DeleteOptions{}, err
	}
	if len(body) > 0 {
		gvk := metav1.SchemeGroupVersion.WithKind("DeleteOptions")
		info, ok := serializerFor(contentType(r))
		if !ok {
			return registry.DeleteOptions{}, unsupportedMediaType(contentType(r), supportedTypes())
		}
		if _, _, err := info.Serializer.Decode(body, &gvk, &opts); err != nil {
			return registry.DeleteOptions{}, apierrors.NewBadRequest(fmt.Sprintf("decode DeleteOptions: %v", err))
		}
	}
	q := r.URL.Query()
	if v := q.Get("gracePeriodSeconds"); v != "" {
		g, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return registry.DeleteOptions{}, apierrors.NewBadRequest(fmt.Sprintf("invalid gracePeriodSeconds %q", v))
		}
		opts.GracePeriodSeconds = &g
	}
	if v := q.Get("propagationPolicy"); v != "" {
		pp := metav1.DeletionPropagation(v)
		opts.PropagationPolicy = &pp
	}
	if v := q.Get("orphanDependents"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return registry.DeleteOptions{}, apierrors.NewBadRequest(fmt.Sprintf("invalid orphanDependents %q", v))
		}
		opts.OrphanDependents = &b
	}
	if q.Get("dryRun") == "All" {
		opts.DryRun = []string{"All"}
	}
	// The deprecated orphanDependents says the same as a policy, and may
	// not be combined with one (kube-apiserver's ValidateDeleteOptions).
	if opts.OrphanDependents != nil {
		if opts.PropagationPolicy != nil {
			return registry.DeleteOptions{}, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "DeleteOptions"}, "", field.ErrorList{field.Invalid(field.NewPath("propagationPolicy"), *opts.PropagationPolicy, "orphanDependents and deletionPropagation cannot be both set")})
		}
		pp := metav1.DeletePropagationBackground
		if *opts.OrphanDependents {
			pp = metav1.DeletePropagationOrphan
		}
		opts.PropagationPolicy = &pp
	}
	if opts.PropagationPolicy != nil {
		switch *opts.PropagationPolicy {
		case metav1.DeletePropagationOrphan, metav1.DeletePropagationBackground, metav1.DeletePropagationForeground:
		default:
			return registry.DeleteOptions{}, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "DeleteOptions"}, "", field.ErrorList{field.NotSupported(field.NewPath("propagationPolicy"), *opts.PropagationPolicy, []string{"Foreground", "Background", "Orphan", "nil"})})
		}
	}
	if opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds < 0 {
		z := int64(1)
		opts.GracePeriodSeconds = &z
	}
	return registry.DeleteOptions{
		DryRun:             len(opts.DryRun) > 0,
		GracePeriodSeconds: opts.GracePeriodSeconds,
		Preconditions:      opts.Preconditions,
		PropagationPolicy:  opts.PropagationPolicy,
	}, nil
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request, req request) error {
	out, err := negotiate(r, req.res.isUnstructured())
	if err != nil {
		return err
	}
	opts, err := parseDeleteOptions(r)
	if err != nil {
		return err
	}
	if req.res.Info.GroupResource() == namespacesGR && immortalNamespaces[req.name] {
		return apierrors.NewForbidden(namespacesGR, req.name, fmt.Errorf("this namespace may not be deleted"))
	}
	obj, deleted, err := req.res.Delete(r.Context(), req.namespace, req.name, opts)
	if err != nil {
		return err
	}
	if !deleted {
		return s.respond(w, r, out, http.StatusOK, req, obj)
	}
	acc, _ := meta.Accessor(obj)
	st := &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details:  &metav1.StatusDetails{Name: req.name, Group: req.gv.Group, Kind: req.res.Info.GVR.Resource, UID: acc.GetUID()},
	}
	writeObject(w, out, http.StatusOK, st, req.gv)
	return nil
}

func (s *Server) handleDeleteCollection(w http.ResponseWriter, r *http.Request, req request) error {
	out, err := negotiate(r, req.res.isUnstructured())
	if err != nil {
		return err
	}
	opts, err := parseDeleteOptions(r)
	if err != nil {
		return err
	}
	filter, err := s.selectors(r, req.res)
	if err != nil {
		return err
	}
	list, err := req.res.List(r.Context(), req.namespace, registry.ListOptions{Filter: filter})
	if err != nil {
		return err
	}
	items, _ := meta.ExtractList(list)
	var gone []runtime.Object
	for _, it := range items {
		acc, _ := meta.Accessor(it)
		obj, _, err := req.res.Delete(r.Context(), acc.GetNamespace(), acc.GetName(), opts)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		gone = append(gone, obj)
	}
	result := req.res.Info.NewList()
	_ = meta.SetList(result, gone)
	writeObject(w, out, http.StatusOK, result, req.gv)
	return nil
}

// warnOnCreate adds the Warning headers the resource's strategy gives a
// created object (kube-apiserver's WarningsOnCreate).
func warnOnCreate(w http.ResponseWriter, r *http.Request, res *served, obj runtime.Object) {
	if cw, ok := res.Strategy.(registry.CreateWarner); ok {
		for _, msg := range cw.WarningsOnCreate(r.Context(), obj) {
			addWarning(w, msg)
		}
	}
}

// Package events holds what the two Event APIs share, as kube-apiserver
// serves them: core/v1 Events and events.k8s.io/v1 Events are the same
// stored objects (etcd keys /registry/events/<ns>/<name>, stored as core/v1)
// seen in two versions. It has the field mapping between the versions, the
// validation of both (the legacy rules for core/v1 writes, the strict ones
// for events.k8s.io/v1 writes), their selectable fields, and the strategy
// of events.k8s.io/v1.
//
// The mapping: note is message, regarding is involvedObject,
// deprecatedSource is source, deprecatedFirstTimestamp/LastTimestamp/Count
// are firstTimestamp/lastTimestamp/count; every other field (eventTime,
// series, action, reason, related, reportingController, reportingInstance,
// type, metadata) has the same name in both.
package events

import (
	"context"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/registry"
)

// Length limits of kube-apiserver's Event validation.
const (
	ReportingInstanceLengthLimit = 128
	ActionLengthLimit            = 128
	ReasonLengthLimit            = 128
	NoteLengthLimit              = 1024
)

// ToV1 returns e as an events.k8s.io/v1 Event.
func ToV1(e *corev1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		TypeMeta:                 metav1.TypeMeta{APIVersion: eventsv1.SchemeGroupVersion.String(), Kind: "Event"},
		ObjectMeta:               *e.ObjectMeta.DeepCopy(),
		EventTime:                e.EventTime,
		ReportingController:      e.ReportingController,
		ReportingInstance:        e.ReportingInstance,
		Action:                   e.Action,
		Reason:                   e.Reason,
		Regarding:                e.InvolvedObject,
		Note:                     e.Message,
		Type:                     e.Type,
		DeprecatedSource:         e.Source,
		DeprecatedFirstTimestamp: e.FirstTimestamp,
		DeprecatedLastTimestamp:  e.LastTimestamp,
		DeprecatedCount:          e.Count,
	}
	if e.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	if e.Related != nil {
		r := *e.Related
		out.Related = &r
	}
	return out
}

// FromV1 returns e as a core/v1 Event.
func FromV1(e *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		TypeMeta:            metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:          *e.ObjectMeta.DeepCopy(),
		InvolvedObject:      e.Regarding,
		Reason:              e.Reason,
		Message:             e.Note,
		Source:              e.DeprecatedSource,
		FirstTimestamp:      e.DeprecatedFirstTimestamp,
		LastTimestamp:       e.DeprecatedLastTimestamp,
		Count:               e.DeprecatedCount,
		Type:                e.Type,
		EventTime:           e.EventTime,
		Action:              e.Action,
		ReportingController: e.ReportingController,
		ReportingInstance:   e.ReportingInstance,
	}
	if e.Series != nil {
		out.Series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	if e.Related != nil {
		r := *e.Related
		out.Related = &r
	}
	return out
}

// Fields is the field-selector set of an Event (core/v1 names; the
// events.k8s.io/v1 labels are converted to these).
func Fields(e *corev1.Event) map[string]string {
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	return map[string]string{
		"metadata.name":                  e.Name,
		"metadata.namespace":             e.Namespace,
		"involvedObject.kind":            e.InvolvedObject.Kind,
		"involvedObject.namespace":       e.InvolvedObject.Namespace,
		"involvedObject.name":            e.InvolvedObject.Name,
		"involvedObject.uid":             string(e.InvolvedObject.UID),
		"involvedObject.apiVersion":      e.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       e.InvolvedObject.FieldPath,
		"reason":                         e.Reason,
		"reportingComponent":             e.ReportingController,
		"source":                         source,
		"type":                           e.Type,
	}
}

// V1FieldLabels are the events.k8s.io/v1 field labels and the core/v1
// fields they select on.
var V1FieldLabels = map[string]string{
	"reason":                    "reason",
	"regarding.kind":            "involvedObject.kind",
	"regarding.namespace":       "involvedObject.namespace",
	"regarding.name":            "involvedObject.name",
	"regarding.uid":             "involvedObject.uid",
	"regarding.apiVersion":      "involvedObject.apiVersion",
	"regarding.resourceVersion": "involvedObject.resourceVersion",
	"regarding.fieldPath":       "involvedObject.fieldPath",
	"reportingController":       "reportingComponent",
	"type":                      "type",
	"metadata.namespace":        "metadata.namespace",
	"metadata.name":             "metadata.name",
}

// ValidateCreate validates a new Event; strict is true for a write through
// events.k8s.io/v1. Field paths are core/v1's, as kube-apiserver validates
// both versions in one internal form.
func ValidateCreate(e *corev1.Event, strict bool) field.ErrorList {
	errs := legacy(e, strict)
	if !strict {
		return errs
	}
	errs = append(errs, series(e)...)
	if e.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	if e.Type != corev1.EventTypeNormal && e.Type != corev1.EventTypeWarning {
		errs = append(errs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", e.Type)))
	}
	for _, f := range []struct {
		name  string
		unset bool
	}{
		{"firstTimestamp", e.FirstTimestamp.IsZero()},
		{"lastTimestamp", e.LastTimestamp.IsZero()},
		{"count", e.Count == 0},
		{"source", e.Source.Component == "" && e.Source.Host == ""},
	} {
		if !f.unset {
			errs = append(errs, field.Invalid(field.NewPath(f.name), "", "needs to be unset"))
		}
	}
	return errs
}

// ValidateUpdate validates an update of old to e; strict as for
// ValidateCreate. Through events.k8s.io/v1 only the series (and metadata)
// may change.
func ValidateUpdate(e, old *corev1.Event, strict bool) field.ErrorList {
	errs := legacy(e, strict)
	if !strict {
		return errs
	}
	if !reflect.DeepEqual(e.Series, old.Series) {
		errs = append(errs, series(e)...)
	}
	immutable := func(path string, a, b any) {
		if !apiequality.Semantic.DeepEqual(a, b) {
			errs = append(errs, field.Invalid(field.NewPath(path), a, "field is immutable"))
		}
	}
	immutable("involvedObject", e.InvolvedObject, old.InvolvedObject)
	immutable("reason", e.Reason, old.Reason)
	immutable("message", e.Message, old.Message)
	immutable("source", e.Source, old.Source)
	immutable("firstTimestamp", e.FirstTimestamp, old.FirstTimestamp)
	immutable("lastTimestamp", e.LastTimestamp, old.LastTimestamp)
	immutable("count", e.Count, old.Count)
	immutable("reason", e.Reason, old.Reason)
	immutable("type", e.Type, old.Type)
	// Sub-microsecond differences are tolerated: clients that serialize
	// with microsecond precision send back what they read.
	if !e.EventTime.Truncate(time.Microsecond).UTC().Equal(old.EventTime.Truncate(time.Microsecond).UTC()) {
		immutable("eventTime", e.EventTime, old.EventTime)
	}
	immutable("action", e.Action, old.Action)
	immutable("related", e.Related, old.Related)
	immutable("reportingController", e.ReportingController, old.ReportingController)
	immutable("reportingInstance", e.ReportingInstance, old.ReportingInstance)
	return errs
}

func series(e *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	if e.Series != nil {
		if e.Series.Count < 2 {
			errs = append(errs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
		}
		if e.Series.LastObservedTime.IsZero() {
			errs = append(errs, field.Required(field.NewPath("series.lastObservedTime"), ""))
		}
	}
	return errs
}

// legacy is the validation every Event write gets. An Event without
// eventTime (the core/v1 recorder's) only needs its namespace to agree with
// its object's; one with eventTime (the events.k8s.io recorder's) also
// needs reportingController, reportingInstance, action and reason.
func legacy(e *corev1.Event, strict bool) field.ErrorList {
	var errs field.ErrorList
	nsPath := field.NewPath("involvedObject", "namespace")
	mismatch := func() {
		errs = append(errs, field.Invalid(nsPath, e.InvolvedObject.Namespace, "does not match event.namespace"))
	}
	if e.EventTime.IsZero() {
		if e.InvolvedObject.Namespace == "" {
			if e.Namespace != metav1.NamespaceNone && e.Namespace != metav1.NamespaceDefault {
				mismatch()
			}
		} else if e.Namespace != e.InvolvedObject.Namespace {
			mismatch()
		}
		return errs
	}
	if e.InvolvedObject.Namespace == "" && e.Namespace != metav1.NamespaceDefault && e.Namespace != metav1.NamespaceSystem {
		mismatch()
	}
	// core/v1 calls the field reportingComponent in its errors.
	rc := field.NewPath("reportingController")
	if !strict {
		rc = field.NewPath("reportingComponent")
	}
	if e.ReportingController == "" {
		errs = append(errs, field.Required(rc, ""))
	}
	for _, msg := range validation.IsQualifiedName(e.ReportingController) {
		errs = append(errs, field.Invalid(rc, e.ReportingController, msg))
	}
	required := func(path, v string, limit int) {
		if v == "" {
			errs = append(errs, field.Required(field.NewPath(path), ""))
		}
		if len(v) > limit {
			errs = append(errs, field.Invalid(field.NewPath(path), "", fmt.Sprintf("can have at most %v characters", limit)))
		}
	}
	required("reportingInstance", e.ReportingInstance, ReportingInstanceLengthLimit)
	required("action", e.Action, ActionLengthLimit)
	required("reason", e.Reason, ReasonLengthLimit)
	if len(e.Message) > NoteLengthLimit {
		errs = append(errs, field.Invalid(field.NewPath("message"), "", fmt.Sprintf("can have at most %v characters", NoteLengthLimit)))
	}
	return errs
}

// V1Strategy is the strategy of events.k8s.io/v1 Events: objects are
// *eventsv1.Event, validated strictly in their core/v1 form.
type V1Strategy struct{}

var (
	_ registry.Strategy            = V1Strategy{}
	_ registry.FieldsSetter        = V1Strategy{}
	_ registry.FieldLabelConverter = V1Strategy{}
)

// NewV1Strategy returns the events.k8s.io/v1 strategy.
func NewV1Strategy() registry.Strategy { return V1Strategy{} }

func (V1Strategy) NamespaceScoped() bool                                            { return true }
func (V1Strategy) Default(runtime.Object)                                           {}
func (V1Strategy) PrepareForCreate(context.Context, runtime.Object)                 {}
func (V1Strategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}

// Validate validates a new Event as kube-apiserver does for events.k8s.io/v1
// (the name must be a DNS subdomain, as for every object; the generic
// registry checks it).
func (V1Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return ValidateCreate(FromV1(obj.(*eventsv1.Event)), true)
}

// ValidateUpdate validates an update through events.k8s.io/v1.
func (V1Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateUpdate(FromV1(obj.(*eventsv1.Event)), FromV1(old.(*eventsv1.Event)), true)
}

// FieldsSet gives the core/v1 field set the converted labels select on.
func (V1Strategy) FieldsSet(obj runtime.Object) map[string]string {
	return Fields(FromV1(obj.(*eventsv1.Event)))
}

// FieldLabelConversion maps events.k8s.io/v1 labels to core/v1 fields.
func (V1Strategy) FieldLabelConversion() func(label, value string) (string, string, error) {
	return func(label, value string) (string, string, error) {
		to, ok := V1FieldLabels[label]
		if !ok {
			return "", "", fmt.Errorf("field label not supported: %s", label)
		}
		return to, value, nil
	}
}

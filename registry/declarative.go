package registry

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/operation"
	"k8s.io/apimachinery/pkg/api/validate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DeclarativeValidator is implemented by the strategies of kinds whose
// kube-apiserver 1.37 strategy opts in to declarative validation (the rules
// written as +k8s: tags in the k8s.io/api types). For those kinds the
// generic registry of kube-apiserver, after the handwritten validation,
//
//   - removes repeated errors (identical strings, the first one kept),
//   - drops each handwritten error marked as covered by a declarative rule
//     when an enforced declarative error matches it (same type, origin and
//     field), and
//   - appends the enforced declarative errors (beta and standard rules; alpha
//     rules are only compared, never reported) at the end of the list.
//
// svcnet's store does the same with apimachinery's own filters, so that the
// causes of a 422 are the same list in the same order.
type DeclarativeValidator interface {
	// ValidateDeclaratively returns the errors of the kind's declarative
	// rules, each marked with its stability level (MarkBeta, MarkAlpha);
	// old is nil on create.
	ValidateDeclaratively(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList
}

// mergeDeclarative combines the handwritten errors of a strategy with its
// declarative ones as kube-apiserver's rest.ValidateDeclarativelyWithMigrationChecks
// does with the DeclarativeValidationBeta gate on (its 1.37 default).
func mergeDeclarative(ctx context.Context, st Strategy, op operation.Type, obj, old runtime.Object, errs field.ErrorList) field.ErrorList {
	dv, ok := st.(DeclarativeValidator)
	if !ok {
		return errs
	}
	const betaEnabled = true
	enforced := validate.FilterEnforcedDeclarativeErrors(ctx, dv.ValidateDeclaratively(ctx, op, obj, old), betaEnabled)
	errs = validate.FilterCoveredHandwrittenErrors(ctx, errs.MarkFromImperative(), enforced, betaEnabled)
	return append(errs, enforced...)
}

// ValidateObjectMetaDeclaratively runs the declarative rules of ObjectMeta
// (apimachinery's generated Validate_ObjectMeta), as every kind's declarative
// validation does first; an update that leaves the metadata unchanged is not
// checked again.
func ValidateObjectMetaDeclaratively(ctx context.Context, op operation.Type, obj, old *metav1.ObjectMeta) field.ErrorList {
	if op == operation.Update && old != nil && equality.Semantic.DeepEqual(obj, old) {
		return nil
	}
	return metav1validation.Validate_ObjectMeta(ctx, operation.Operation{Type: op}, field.NewPath("metadata"), obj, old)
}

package tables

import (
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ---- networkpolicies ----

// networkPolicyPrinter is kube-apiserver's: NAME, POD-SELECTOR (the
// selector in label-query form, "<none>" when empty), AGE.
var networkPolicyPrinter = printer{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Pod-Selector", Type: "string", Description: networkingv1.NetworkPolicySpec{}.SwaggerDoc()["podSelector"]},
		ageColumn,
	},
	row: func(obj runtime.Object, now time.Time) ([]any, error) {
		np, ok := obj.(*networkingv1.NetworkPolicy)
		if !ok {
			return nil, wrongType("NetworkPolicy", obj)
		}
		return []any{np.Name, metav1.FormatLabelSelector(&np.Spec.PodSelector), age(np.CreationTimestamp, now)}, nil
	},
}

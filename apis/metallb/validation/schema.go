package validation

import (
	"fmt"
	"math"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The checks of the MetalLB CRDs' OpenAPI schemas that concern the kinds
// svcnet validates, with kube-apiserver's messages for schema violations.
// obj is the decoded JSON object (unstructured content).

type intRule struct {
	name     string
	min, max int64
	required bool
}

var (
	peerIntRules = []intRule{
		{name: "myASN", min: 0, max: math.MaxUint32, required: true},
		{name: "peerASN", min: 0, max: math.MaxUint32},
		{name: "localASN", min: 1, max: math.MaxUint32},
		{name: "peerPort", min: 1, max: 16384},
	}
	peerV1beta1IntRules = []intRule{
		{name: "myASN", min: 0, max: math.MaxUint32, required: true},
		{name: "peerASN", min: 0, max: math.MaxUint32, required: true},
		{name: "peerPort", min: 0, max: 16384},
	}
	bfdIntRules = []intRule{
		{name: "receiveInterval", min: 10, max: 60000},
		{name: "transmitInterval", min: 10, max: 60000},
		{name: "detectMultiplier", min: 2, max: 255},
		{name: "echoInterval", min: 10, max: 60000},
		{name: "minimumTtl", min: 1, max: 254},
	}
	advIntRules = []intRule{
		{name: "aggregationLength", min: 1, max: math.MaxInt64},
		{name: "aggregationLengthV6", min: math.MinInt64, max: math.MaxInt64},
		{name: "localPref", min: math.MinInt64, max: math.MaxInt64},
	}
)

// SchemaBGPPeer checks a BGPPeer (metallb.io/v1beta2) against its schema.
func SchemaBGPPeer(obj map[string]any) field.ErrorList {
	spec, errs := specOf(obj)
	if spec == nil {
		return errs
	}
	p := field.NewPath("spec")
	errs = append(errs, checkInts(spec, p, peerIntRules)...)
	if v, ok := spec["dynamicASN"]; ok {
		if s, isStr := v.(string); !isStr || (s != "internal" && s != "external") {
			errs = append(errs, field.NotSupported(p.Child("dynamicASN"), v, []string{"internal", "external"}))
		}
	}
	return errs
}

// SchemaBGPAdvertisement checks a BGPAdvertisement against its schema,
// including its CEL rule on serviceSelectors and aggregation lengths.
func SchemaBGPAdvertisement(obj map[string]any) field.ErrorList {
	spec, errs := specOf(obj)
	if spec == nil {
		return errs
	}
	p := field.NewPath("spec")
	errs = append(errs, checkInts(spec, p, advIntRules)...)
	if len(errs) > 0 {
		return errs
	}
	if sels, _ := spec["serviceSelectors"].([]any); len(sels) > 0 {
		l4, has4 := spec["aggregationLength"]
		l6, has6 := spec["aggregationLengthV6"]
		if (has4 && toInt(l4) != 32) || (has6 && toInt(l6) != 128) {
			errs = append(errs, field.Invalid(p, "object", "serviceSelectors and aggregationLength are mutually exclusive, can only be used together with default aggregationLength (32) and aggregationLengthV6 (128)"))
		}
	}
	return errs
}

// SchemaL2Advertisement checks an L2Advertisement against its schema:
// each preferredNodeSelectors item needs a weight, an integer from 1 to
// 100, and a preference object.
func SchemaL2Advertisement(obj map[string]any) field.ErrorList {
	spec, errs := specOf(obj)
	if spec == nil {
		return errs
	}
	p := field.NewPath("spec", "preferredNodeSelectors")
	v, ok := spec["preferredNodeSelectors"]
	if !ok || v == nil {
		return errs
	}
	items, ok := v.([]any)
	if !ok {
		return append(errs, typeErr(p, v, "array"))
	}
	for i, it := range items {
		ip := p.Index(i)
		m, ok := it.(map[string]any)
		if !ok {
			errs = append(errs, typeErr(ip, it, "object"))
			continue
		}
		// kube-apiserver prunes nulls of fields that are not nullable
		// before validating: a null weight or preference is a missing one.
		present := map[string]any{}
		for k, x := range m {
			if x != nil {
				present[k] = x
			}
		}
		errs = append(errs, checkInts(present, ip, preferredIntRules)...)
		if pref, ok := present["preference"]; !ok {
			errs = append(errs, field.Required(ip.Child("preference"), ""))
		} else if _, isObj := pref.(map[string]any); !isObj {
			errs = append(errs, typeErr(ip.Child("preference"), pref, "object"))
		}
	}
	return errs
}

var preferredIntRules = []intRule{{name: "weight", min: 1, max: 100, required: true}}

// SchemaBGPPeerV1beta1 checks a metallb.io/v1beta1 BGPPeer against that
// version's schema: myASN, peerASN and peerAddress required.
func SchemaBGPPeerV1beta1(obj map[string]any) field.ErrorList {
	spec, errs := specOf(obj)
	if spec == nil {
		return errs
	}
	p := field.NewPath("spec")
	errs = append(errs, checkInts(spec, p, peerV1beta1IntRules)...)
	if v, ok := spec["peerAddress"]; !ok {
		errs = append(errs, field.Required(p.Child("peerAddress"), ""))
	} else if _, isStr := v.(string); !isStr {
		errs = append(errs, typeErr(p.Child("peerAddress"), v, "string"))
	}
	return errs
}

// SchemaBFDProfile checks a BFDProfile against its schema: the intervals,
// multiplier and TTL in their ranges, echoMode and passiveMode booleans.
func SchemaBFDProfile(obj map[string]any) field.ErrorList {
	spec, errs := specOf(obj)
	if spec == nil {
		return errs
	}
	p := field.NewPath("spec")
	errs = append(errs, checkInts(spec, p, bfdIntRules)...)
	for _, name := range []string{"echoMode", "passiveMode"} {
		if v, ok := spec[name]; ok {
			if _, isBool := v.(bool); !isBool {
				errs = append(errs, typeErr(p.Child(name), v, "boolean"))
			}
		}
	}
	return errs
}

// ConfigurationResults are the values of a ConfigurationState's
// status.result (the schema's enum).
var ConfigurationResults = []string{"Valid", "Invalid", "Unknown"}

// SchemaConfigurationState checks a ConfigurationState's status against
// its schema: result one of ConfigurationResults, errorSummary a string.
func SchemaConfigurationState(obj map[string]any) field.ErrorList {
	v, ok := obj["status"]
	if !ok || v == nil {
		return nil
	}
	p := field.NewPath("status")
	st, ok := v.(map[string]any)
	if !ok {
		return field.ErrorList{typeErr(p, v, "object")}
	}
	var errs field.ErrorList
	if r, ok := st["result"]; ok {
		if s, isStr := r.(string); !isStr {
			errs = append(errs, typeErr(p.Child("result"), r, "string"))
		} else if !slices.Contains(ConfigurationResults, s) {
			errs = append(errs, field.NotSupported(p.Child("result"), s, ConfigurationResults))
		}
	}
	if e, ok := st["errorSummary"]; ok {
		if _, isStr := e.(string); !isStr {
			errs = append(errs, typeErr(p.Child("errorSummary"), e, "string"))
		}
	}
	return errs
}

// DefaultBGPPeer applies the schema's defaults (peerPort 179, disableMP
// and dualStackAddressFamily false), as kube-apiserver does for the CRD.
func DefaultBGPPeer(obj map[string]any) {
	if spec, ok := obj["spec"].(map[string]any); ok {
		setDefault(spec, "peerPort", int64(179))
		setDefault(spec, "disableMP", false)
		setDefault(spec, "dualStackAddressFamily", false)
	}
}

// DefaultBGPAdvertisement applies the schema's defaults (aggregation
// lengths 32 and 128).
func DefaultBGPAdvertisement(obj map[string]any) {
	if spec, ok := obj["spec"].(map[string]any); ok {
		setDefault(spec, "aggregationLength", int64(32))
		setDefault(spec, "aggregationLengthV6", int64(128))
	}
}

// DefaultIPAddressPool applies the schema's defaults (autoAssign true,
// avoidBuggyIPs false).
func DefaultIPAddressPool(obj map[string]any) {
	if spec, ok := obj["spec"].(map[string]any); ok {
		setDefault(spec, "autoAssign", true)
		setDefault(spec, "avoidBuggyIPs", false)
	}
}

func setDefault(m map[string]any, k string, v any) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

func specOf(obj map[string]any) (map[string]any, field.ErrorList) {
	v, ok := obj["spec"]
	if !ok || v == nil {
		return nil, nil
	}
	spec, ok := v.(map[string]any)
	if !ok {
		return nil, field.ErrorList{typeErr(field.NewPath("spec"), v, "object")}
	}
	return spec, nil
}

func checkInts(m map[string]any, p *field.Path, rules []intRule) field.ErrorList {
	var errs field.ErrorList
	for _, r := range rules {
		fp := p.Child(r.name)
		v, ok := m[r.name]
		if !ok {
			if r.required {
				errs = append(errs, field.Required(fp, ""))
			}
			continue
		}
		n, isInt := asInt(v)
		if !isInt {
			errs = append(errs, typeErr(fp, v, "integer"))
			continue
		}
		if n < r.min {
			errs = append(errs, field.Invalid(fp, n, fmt.Sprintf("%s in body should be greater than or equal to %d", fp, r.min)))
		}
		if n > r.max {
			errs = append(errs, field.Invalid(fp, n, fmt.Sprintf("%s in body should be less than or equal to %d", fp, r.max)))
		}
	}
	return errs
}

// typeErr is kube-apiserver's message for a value of the wrong JSON type.
func typeErr(p *field.Path, v any, want string) *field.Error {
	return field.Invalid(p, jsonType(v), fmt.Sprintf("%s in body must be of type %s: %q", p, want, jsonType(v)))
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case int64, int, int32, uint32, uint64:
		return "integer"
	default:
		if _, ok := asInt(v); ok {
			return "integer"
		}
		return "number"
	}
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case uint32:
		return int64(n), true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<63 {
			return int64(n), true
		}
	}
	return 0, false
}

func toInt(v any) int64 {
	n, _ := asInt(v)
	return n
}

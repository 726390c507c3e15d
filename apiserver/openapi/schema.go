package openapi

import (
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// refPrefix is where component schemas live in an OpenAPI v3 document.
const refPrefix = "#/components/schemas/"

// Extension names kube-apiserver uses.
const (
	extGVK            = "x-kubernetes-group-version-kind"
	extAction         = "x-kubernetes-action"
	extPatchStrategy  = "x-kubernetes-patch-strategy"
	extPatchMergeKey  = "x-kubernetes-patch-merge-key"
	extListType       = "x-kubernetes-list-type"
	extListMapKeys    = "x-kubernetes-list-map-keys"
	extIntOrString    = "x-kubernetes-int-or-string"
	extPreserveFields = "x-kubernetes-preserve-unknown-fields"
	extMapType        = "x-kubernetes-map-type"
)

// swaggerDocer is implemented by every k8s.io/api and apimachinery struct:
// the generated field documentation ("" is the type's own description).
type swaggerDocer interface{ SwaggerDoc() map[string]string }

// modelNamer is implemented by the generated OpenAPIModelName methods.
type modelNamer interface{ OpenAPIModelName() string }

// builder collects component schemas for Go types by reflection.
type builder struct {
	schemas map[string]*spec.Schema
	// gvks are the x-kubernetes-group-version-kind values to attach to a
	// model, by model name.
	gvks map[string][]schema.GroupVersionKind
}

func newBuilder() *builder {
	return &builder{schemas: map[string]*spec.Schema{}, gvks: map[string][]schema.GroupVersionKind{}}
}

// modelName is the OpenAPI definition name of a named Go type:
// io.k8s.api.core.v1.Service for k8s.io/api/core/v1.Service.
func modelName(t reflect.Type) string {
	if n, ok := reflect.Zero(t).Interface().(modelNamer); ok {
		return n.OpenAPIModelName()
	}
	pkg := t.PkgPath()
	first, rest, _ := strings.Cut(pkg, "/")
	labels := strings.Split(first, ".")
	for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
		labels[i], labels[j] = labels[j], labels[i]
	}
	name := strings.Join(labels, ".")
	if rest != "" {
		name += "." + strings.ReplaceAll(rest, "/", ".")
	}
	return name + "." + t.Name()
}

// special are types whose JSON form is not their Go structure. Their
// descriptions come from specialDocs (generated from their Go comments).
var special = map[string]spec.Schema{
	"io.k8s.apimachinery.pkg.apis.meta.v1.Time": {SchemaProps: spec.SchemaProps{
		Type: spec.StringOrArray{"string"}, Format: "date-time",
	}},
	"io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": {SchemaProps: spec.SchemaProps{
		Type: spec.StringOrArray{"string"}, Format: "date-time",
	}},
	"io.k8s.apimachinery.pkg.apis.meta.v1.Duration": {SchemaProps: spec.SchemaProps{
		Type: spec.StringOrArray{"string"},
	}},
	"io.k8s.apimachinery.pkg.util.intstr.IntOrString": {
		SchemaProps: spec.SchemaProps{
			Format: "int-or-string",
			// OpenAPI v3 form: either an integer or a string.
			OneOf: []spec.Schema{{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"integer"}}}, {SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}}}},
		},
		VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{extIntOrString: true}},
	},
	"io.k8s.apimachinery.pkg.api.resource.Quantity": {SchemaProps: spec.SchemaProps{
		OneOf: []spec.Schema{{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}}}, {SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"number"}}}},
	}},
	"io.k8s.apimachinery.pkg.runtime.RawExtension": {SchemaProps: spec.SchemaProps{
		Type: spec.StringOrArray{"object"},
	}},
	"io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1": {SchemaProps: spec.SchemaProps{
		Type: spec.StringOrArray{"object"},
	}},
	"io.k8s.apimachinery.pkg.apis.meta.v1.Patch": {SchemaProps: spec.SchemaProps{
		Type: spec.StringOrArray{"object"},
	}},
}

// define makes sure t (a named struct or special type) has a component
// schema and returns its model name.
func (b *builder) define(t reflect.Type) string {
	name := modelName(t)
	if _, done := b.schemas[name]; done {
		return name
	}
	if s, ok := special[name]; ok {
		s := s
		s.Description = specialDocs[name]
		b.schemas[name] = &s
		return name
	}
	s := &spec.Schema{}
	b.schemas[name] = s // registered before filling, so recursive types terminate
	s.Type = spec.StringOrArray{"object"}
	var docs map[string]string
	if d, ok := reflect.Zero(t).Interface().(swaggerDocer); ok {
		docs = d.SwaggerDoc()
	}
	s.Description = strings.TrimSpace(docs[""]) // openapi-gen trims; swagger docs may keep a trailing space
	s.Properties = map[string]spec.Schema{}
	b.fields(t, name, docs, s)
	if mt, ok := typeMapTypes[name]; ok {
		s.AddExtension(extMapType, mt)
	}
	if len(s.Properties) == 0 {
		s.Properties = nil
	}
	sort.Strings(s.Required)
	return name
}

// fields adds t's JSON fields to s, flattening inline (embedded) structs.
func (b *builder) fields(t reflect.Type, model string, docs map[string]string, s *spec.Schema) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		inline := strings.Contains(","+opts+",", ",inline,") || (f.Anonymous && name == "")
		if inline {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				var inner map[string]string
				if d, ok := reflect.Zero(ft).Interface().(swaggerDocer); ok {
					inner = d.SwaggerDoc()
				}
				b.fields(ft, model, inner, s)
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		prop, ok := b.property(f.Type, docs[name])
		if !ok {
			continue
		}
		addEnum(&prop, f.Type)
		if strategy := f.Tag.Get("patchStrategy"); strategy != "" {
			prop.AddExtension(extPatchStrategy, strategy)
		}
		mk, marked := fieldMarkers[model+"."+name]
		key := f.Tag.Get("patchMergeKey")
		if key != "" {
			prop.AddExtension(extPatchMergeKey, key)
		}
		switch {
		case mk.listType != "":
			prop.AddExtension(extListType, mk.listType)
			if mk.listType == "map" {
				keys := mk.listMapKeys
				if len(keys) == 0 && key != "" {
					keys = []string{key}
				}
				prop.AddExtension(extListMapKeys, keys)
			}
		case key != "" && prop.Type.Contains("array"):
			// No +listType marker known: a merge key makes it a map list.
			prop.AddExtension(extListType, "map")
			prop.AddExtension(extListMapKeys, []string{key})
		}
		if mk.mapType != "" {
			prop.AddExtension(extMapType, mk.mapType)
		}
		omitEmpty := strings.Contains(","+opts+",", ",omitempty,")
		if def, ok := fieldDefault(f.Type, omitEmpty, mk.def); ok {
			prop.Default = def
		}
		s.Properties[name] = prop
		if !strings.Contains(","+opts+",", ",omitempty,") && !strings.Contains(","+opts+",", ",omitzero,") && !(marked && mk.optional) {
			s.Required = append(s.Required, name)
		}
	}
}

// property is the schema of a field of type t. Named structs are referenced
// through allOf (a description beside a bare $ref is ignored in OpenAPI
// 3.0); non-pointer structs get the empty-object default, as kube-apiserver
// publishes them. ok is false for types with no JSON form (func, chan).
func (b *builder) property(t reflect.Type, description string) (spec.Schema, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s, ok := b.typeSchema(t)
	if !ok {
		return s, false
	}
	if s.Ref.String() != "" {
		ref := s
		s = spec.Schema{SchemaProps: spec.SchemaProps{AllOf: []spec.Schema{ref}}}
	}
	s.Description = strings.TrimSpace(description)
	return s, true
}

// typeSchema is the schema of a value of type t, without description.
func (b *builder) typeSchema(t reflect.Type) (spec.Schema, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct {
		return *spec.RefSchema(refPrefix + b.define(t)), true
	}
	switch t.Kind() {
	case reflect.String:
		return typed("string", ""), true
	case reflect.Bool:
		return typed("boolean", ""), true
	case reflect.Int32, reflect.Uint32, reflect.Int16, reflect.Uint16, reflect.Int8, reflect.Uint8:
		return typed("integer", "int32"), true
	case reflect.Int64, reflect.Uint64, reflect.Int, reflect.Uint:
		return typed("integer", "int64"), true
	case reflect.Float32:
		return typed("number", "float"), true
	case reflect.Float64:
		return typed("number", "double"), true
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return typed("string", "byte"), true
		}
		item, ok := b.typeSchema(t.Elem())
		if !ok {
			return spec.Schema{}, false
		}
		item = b.defaulted(t.Elem(), item)
		s := typed("array", "")
		s.Items = &spec.SchemaOrArray{Schema: &item}
		return s, true
	case reflect.Map:
		val, ok := b.typeSchema(t.Elem())
		if !ok {
			return spec.Schema{}, false
		}
		val = b.defaulted(t.Elem(), val)
		s := typed("object", "")
		s.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: &val}
		return s, true
	case reflect.Interface:
		s := typed("object", "")
		s.AddExtension(extPreserveFields, true)
		return s, true
	}
	return spec.Schema{}, false
}

// defaulted shapes a list item or map value as openapi-gen does: a struct
// reference goes through allOf, and non-pointer values carry their zero
// value as default ({} for structs, "" for strings, 0, false).
func (b *builder) defaulted(t reflect.Type, s spec.Schema) spec.Schema {
	if s.Ref.String() != "" {
		s = spec.Schema{SchemaProps: spec.SchemaProps{AllOf: []spec.Schema{s}}}
	}
	if def, ok := zeroDefault(t); ok {
		s.Default = def
	}
	return s
}

func isSpecial(t reflect.Type) bool {
	_, ok := special[modelNameIfNamed(t)]
	return ok
}

func modelNameIfNamed(t reflect.Type) string {
	if t.Name() == "" || t.PkgPath() == "" {
		return ""
	}
	return modelName(t)
}

func typed(typ, format string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}, Format: format}}
}

// gvkExtension renders GVKs as kube-apiserver does: a list of
// {group, kind, version} maps.
func gvkExtension(gvks ...schema.GroupVersionKind) []any {
	out := make([]any, 0, len(gvks))
	for _, g := range gvks {
		out = append(out, map[string]any{"group": g.Group, "kind": g.Kind, "version": g.Version})
	}
	return out
}

// finish attaches the collected GVK extensions to their models.
func (b *builder) finish() {
	for name, gvks := range b.gvks {
		if s, ok := b.schemas[name]; ok {
			sort.Slice(gvks, func(i, j int) bool { return gvks[i].String() < gvks[j].String() })
			s.AddExtension(extGVK, gvkExtension(gvks...))
		}
	}
}

// addEnum records the values of an +enum string type as openapi-gen does: a
// field of the enum type gets "enum" plus a "Possible enum values" paragraph
// in its description; a list or map of it gets "enum" on its items.
func addEnum(prop *spec.Schema, t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		vals, ok := enums[modelNameIfNamed(t)]
		if !ok {
			return
		}
		prop.Enum = enumValues(vals)
		lines := make([]string, len(vals))
		for i, v := range vals {
			lines[i] = v.line
		}
		sort.Strings(lines)
		prop.Description = strings.TrimSpace(prop.Description + "\n\nPossible enum values:\n" + strings.Join(lines, "\n"))
	case reflect.Slice, reflect.Map:
		e := t.Elem()
		for e.Kind() == reflect.Pointer {
			e = e.Elem()
		}
		vals, ok := enums[modelNameIfNamed(e)]
		if !ok || e.Kind() != reflect.String {
			return
		}
		target := prop.AdditionalProperties
		if t.Kind() == reflect.Slice && prop.Items != nil && prop.Items.Schema != nil {
			prop.Items.Schema.Enum = enumValues(vals)
		} else if target != nil && target.Schema != nil {
			target.Schema.Enum = enumValues(vals)
		}
	}
}

// enumValues lists the values sorted as openapi-gen sorts them (by their
// quoted form).
func enumValues(vals []enumValue) []any {
	quoted := make([]string, len(vals))
	byQuoted := map[string]string{}
	for i, v := range vals {
		quoted[i] = strconv.Quote(v.value)
		byQuoted[quoted[i]] = v.value
	}
	sort.Strings(quoted)
	out := make([]any, len(quoted))
	for i, q := range quoted {
		out[i] = byQuoted[q]
	}
	return out
}

// fieldDefault is the "default" openapi-gen publishes for a field: its
// +default marker, else the zero value a non-omitempty value field always
// has on the wire, else {} for a non-pointer struct. Types with their own
// JSON form (Time, IntOrString, Quantity, ...) and pointers, slices and maps
// get none.
func fieldDefault(t reflect.Type, omitEmpty bool, marker string) (any, bool) {
	if marker != "" {
		var v any
		if err := json.Unmarshal([]byte(marker), &v); err == nil {
			return v, true
		}
	}
	if t.Kind() == reflect.Struct {
		return zeroDefault(t)
	}
	if omitEmpty {
		return nil, false
	}
	return zeroDefault(t)
}

// zeroDefault is the JSON zero value of a non-pointer value type.
func zeroDefault(t reflect.Type) (any, bool) {
	switch t.Kind() {
	case reflect.Struct:
		if isSpecial(t) {
			return nil, false
		}
		return map[string]any{}, true
	case reflect.String:
		return "", true
	case reflect.Bool:
		return false, true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return 0, true
	case reflect.Float32, reflect.Float64:
		return 0.0, true
	}
	return nil, false
}

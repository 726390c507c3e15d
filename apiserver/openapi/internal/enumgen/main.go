// Command enumgen writes zz_generated_enums.go for package openapi from the
// Go sources of the k8s.io/api and apimachinery packages svcnet serves: the
// values of every string type marked +enum, with the constant comments
// openapi-gen turns into "Possible enum values" descriptions, and the
// comment markers that shape published schemas but are invisible at run time
// (+listType, +listMapKey, +mapType, +structType, +optional, +default). Run it with
// `go generate ./apiserver/openapi` after changing the k8s.io/api version.
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// packages are the Go packages (module-relative) scanned, with the OpenAPI
// model-name prefix of their types.
var packages = []struct{ module, dir, prefix string }{
	{"k8s.io/api", "core/v1", "io.k8s.api.core.v1."},
	{"k8s.io/api", "apps/v1", "io.k8s.api.apps.v1."},
	{"k8s.io/api", "discovery/v1", "io.k8s.api.discovery.v1."},
	{"k8s.io/api", "coordination/v1", "io.k8s.api.coordination.v1."},
	{"k8s.io/api", "autoscaling/v1", "io.k8s.api.autoscaling.v1."},
	{"k8s.io/api", "networking/v1", "io.k8s.api.networking.v1."},
	{"k8s.io/apimachinery", "pkg/apis/meta/v1", "io.k8s.apimachinery.pkg.apis.meta.v1."},
}

// marker is what the comment markers say about one struct field.
type marker struct {
	listType, mapType, def string
	listMapKeys            []string
	optional               bool
}

type value struct{ name, value, comment string }

// specialDocs are the types whose schemas package openapi writes by hand;
// their descriptions come from their Go doc comments, processed as
// openapi-gen does.
var specialDocs = []struct{ module, dir, typ, model string }{
	{"k8s.io/apimachinery", "pkg/apis/meta/v1", "Time", "io.k8s.apimachinery.pkg.apis.meta.v1.Time"},
	{"k8s.io/apimachinery", "pkg/apis/meta/v1", "MicroTime", "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"},
	{"k8s.io/apimachinery", "pkg/apis/meta/v1", "Duration", "io.k8s.apimachinery.pkg.apis.meta.v1.Duration"},
	{"k8s.io/apimachinery", "pkg/apis/meta/v1", "FieldsV1", "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1"},
	{"k8s.io/apimachinery", "pkg/apis/meta/v1", "Patch", "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"},
	{"k8s.io/apimachinery", "pkg/util/intstr", "IntOrString", "io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
	{"k8s.io/apimachinery", "pkg/api/resource", "Quantity", "io.k8s.apimachinery.pkg.api.resource.Quantity"},
	{"k8s.io/apimachinery", "pkg/runtime", "RawExtension", "io.k8s.apimachinery.pkg.runtime.RawExtension"},
}

// openAPIDescription applies openapi-gen's comment rules: stop at "---",
// drop TODO and +marker lines, join lines with spaces, keep paragraphs,
// and put indented lines on lines of their own.
func openAPIDescription(text string) string {
	var buf strings.Builder
	delPrev := func() {
		s := buf.String()
		if len(s) > 0 {
			buf.Reset()
			buf.WriteString(s[:len(s)-1])
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if line == "---" {
			break
		}
		line = strings.TrimRight(line, " ")
		leading := strings.TrimLeft(line, " ")
		switch {
		case len(line) == 0:
			delPrev()
			buf.WriteString("\n\n")
		case strings.HasPrefix(leading, "TODO"), strings.HasPrefix(leading, "+"):
		default:
			if strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
				delPrev()
				line = "\n" + line + "\n"
			} else {
				line += " "
			}
			buf.WriteString(line)
		}
	}
	return strings.TrimSpace(buf.String())
}

func typeDoc(dir, typ string) (string, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	if err != nil {
		return "", err
	}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.TYPE {
					continue
				}
				for _, sp := range g.Specs {
					ts := sp.(*ast.TypeSpec)
					if ts.Name.Name != typ {
						continue
					}
					doc := ts.Doc
					if doc == nil {
						doc = g.Doc
					}
					if doc == nil {
						return "", nil
					}
					return openAPIDescription(doc.Text()), nil
				}
			}
		}
	}
	return "", fmt.Errorf("type %s not found in %s", typ, dir)
}

func main() {
	out := "zz_generated_enums.go"
	if len(os.Args) > 1 {
		out = os.Args[1]
	}
	src, err := generate()
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(out, src, 0o644); err != nil {
		fail(err)
	}
}

// generate returns the formatted source of zz_generated_enums.go.
func generate() ([]byte, error) {
	enums := map[string][]value{}
	fields := map[string]marker{}
	types := map[string]string{}
	for _, p := range packages {
		dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", p.module).Output()
		if err != nil {
			return nil, fmt.Errorf("locate %s: %w", p.module, err)
		}
		if err := scan(filepath.Join(strings.TrimSpace(string(dir)), p.dir), p.prefix, enums, fields, types); err != nil {
			return nil, err
		}
	}
	docs := map[string]string{}
	for _, sd := range specialDocs {
		dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", sd.module).Output()
		if err != nil {
			return nil, fmt.Errorf("locate %s: %w", sd.module, err)
		}
		d, err := typeDoc(filepath.Join(strings.TrimSpace(string(dir)), sd.dir), sd.typ)
		if err != nil {
			return nil, err
		}
		docs[sd.model] = d
	}
	var names []string
	for n := range enums {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	b.WriteString("// Code generated by internal/enumgen from the k8s.io/api sources. DO NOT EDIT.\n\npackage openapi\n\n")
	b.WriteString("// enums maps a model name to the values of its +enum type, with the\n// description line openapi-gen writes for each.\nvar enums = map[string][]enumValue{\n")
	for _, n := range names {
		fmt.Fprintf(&b, "\t%q: {\n", n)
		for _, v := range enums[n] {
			fmt.Fprintf(&b, "\t\t{%q, %q},\n", v.value, description(v))
		}
		b.WriteString("\t},\n")
	}
	b.WriteString("}\n\n")
	var keys []string
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteString("// fieldMarkers are the +listType/+listMapKey/+mapType/+optional markers\n// of struct fields, by model name and JSON field name.\nvar fieldMarkers = map[string]fieldMarker{\n")
	for _, k := range keys {
		m := fields[k]
		fmt.Fprintf(&b, "\t%q: {listType: %q, mapType: %q, optional: %v", k, m.listType, m.mapType, m.optional)
		if m.def != "" {
			fmt.Fprintf(&b, ", def: %q", m.def)
		}
		if len(m.listMapKeys) > 0 {
			fmt.Fprintf(&b, ", listMapKeys: %#v", m.listMapKeys)
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n\n")
	keys = keys[:0]
	for k := range types {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteString("// specialDocs are the descriptions of the hand-written schemas, from\n// their types' Go doc comments.\nvar specialDocs = map[string]string{\n")
	for _, sd := range specialDocs {
		fmt.Fprintf(&b, "\t%q: %q,\n", sd.model, docs[sd.model])
	}
	b.WriteString("}\n\n")
	b.WriteString("// typeMapTypes are the +structType/+mapType markers of types, by model name.\nvar typeMapTypes = map[string]string{\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "\t%q: %q,\n", k, types[k])
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

// description is openapi-gen's enum line: the constant's comment without
// the leading constant name, whitespace collapsed.
func description(v value) string {
	c := strings.TrimSpace(v.comment)
	c = strings.TrimSpace(strings.TrimPrefix(c, v.name))
	c = strings.Join(strings.Fields(c), " ")
	return fmt.Sprintf(" - `%q` %s", v.value, c)
}

// markers reads "+name=value" comment markers; repeated names keep every
// value in order.
func markers(doc *ast.CommentGroup) map[string][]string {
	out := map[string][]string{}
	if doc == nil {
		return out
	}
	for _, c := range doc.List {
		line := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
		if !strings.HasPrefix(line, "+") {
			continue
		}
		name, val, _ := strings.Cut(strings.TrimPrefix(line, "+"), "=")
		out[name] = append(out[name], val)
	}
	return out
}

func structMarkers(prefix string, ts *ast.TypeSpec, doc *ast.CommentGroup, fields map[string]marker, types map[string]string) {
	st, ok := ts.Type.(*ast.StructType)
	if !ok {
		return
	}
	tm := markers(doc)
	if v := tm["structType"]; len(v) > 0 {
		types[prefix+ts.Name.Name] = v[0]
	} else if v := tm["mapType"]; len(v) > 0 {
		types[prefix+ts.Name.Name] = v[0]
	}
	for _, f := range st.Fields.List {
		if f.Tag == nil || len(f.Names) == 0 {
			continue
		}
		tag, _ := strconv.Unquote(f.Tag.Value)
		jsonName, _, _ := strings.Cut(reflectTag(tag, "json"), ",")
		if jsonName == "" || jsonName == "-" {
			continue
		}
		fm := markers(f.Doc)
		var m marker
		if v := fm["listType"]; len(v) > 0 {
			m.listType = v[0]
		}
		m.listMapKeys = fm["listMapKey"]
		if v := fm["mapType"]; len(v) > 0 {
			m.mapType = v[0]
		}
		_, opt := fm["optional"]
		_, kopt := fm["k8s:optional"]
		m.optional = opt || kopt
		if v := fm["default"]; len(v) > 0 && !strings.HasPrefix(v[0], "ref(") {
			m.def = v[0]
		}
		if m.listType != "" || m.mapType != "" || m.optional || m.def != "" {
			fields[prefix+ts.Name.Name+"."+jsonName] = m
		}
	}
}

// reflectTag is reflect.StructTag.Get without importing reflect for it.
func reflectTag(tag, key string) string {
	for tag != "" {
		tag = strings.TrimLeft(tag, " ")
		name, rest, ok := strings.Cut(tag, ":\"")
		if !ok {
			return ""
		}
		val, after, ok := strings.Cut(rest, "\"")
		if !ok {
			return ""
		}
		if name == key {
			return val
		}
		tag = after
	}
	return ""
}

func scan(dir, prefix string, enums map[string][]value, fields map[string]marker, types map[string]string) error {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		return fmt.Errorf("parse %s: %w", dir, err)
	}
	enumTypes := map[string]bool{}
	var consts []*ast.GenDecl
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok {
					continue
				}
				switch g.Tok {
				case token.TYPE:
					for _, s := range g.Specs {
						ts := s.(*ast.TypeSpec)
						doc := ts.Doc
						if doc == nil {
							doc = g.Doc
						}
						structMarkers(prefix, ts, doc, fields, types)
						if id, ok := ts.Type.(*ast.Ident); ok && id.Name == "string" && doc != nil && strings.Contains(doc.Text(), "+enum") {
							enumTypes[ts.Name.Name] = true
						}
					}
				case token.CONST:
					consts = append(consts, g)
				}
			}
		}
	}
	for _, g := range consts {
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			id, ok := vs.Type.(*ast.Ident)
			if !ok || !enumTypes[id.Name] || len(vs.Values) != 1 {
				continue
			}
			lit, ok := vs.Values[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				continue
			}
			val, _ := strconv.Unquote(lit.Value)
			comment := ""
			if vs.Doc != nil {
				var lines []string
				for _, c := range vs.Doc.List {
					lines = append(lines, strings.TrimSpace(strings.TrimPrefix(c.Text, "//")))
				}
				comment = strings.Join(lines, " ")
			}
			v := value{name: vs.Names[0].Name, value: val, comment: comment}
			key := prefix + id.Name
			replaced := false
			for i, old := range enums[key] {
				if old.value == v.value {
					// openapi-gen keeps the longer comment (then the smaller one).
					if len(old.comment) < len(v.comment) || (len(old.comment) == len(v.comment) && old.comment > v.comment) {
						enums[key][i] = v
					}
					replaced = true
				}
			}
			if !replaced {
				enums[key] = append(enums[key], v)
			}
		}
	}
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "enumgen:", err)
	os.Exit(1)
}

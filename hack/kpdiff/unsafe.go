package main

import (
	"fmt"
	"reflect"
	"unsafe"
)

// kube-proxy's proxiers keep their dependencies in unexported fields, and
// their own NewFakeProxier lives in _test.go files we cannot import. These
// helpers fill those fields the way NewFakeProxier does, so that the real
// syncProxyRules runs against fakes only: no netlink, no conntrack, no
// listening health-check sockets, no nft or iptables binary.

// field returns the (settable) field name of the struct *obj points to.
func field(obj any, name string) reflect.Value {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer {
		panic(fmt.Sprintf("field: %T is not a pointer", obj))
	}
	f := v.Elem().FieldByName(name)
	if !f.IsValid() {
		panic(fmt.Sprintf("field: %T has no field %q (kube-proxy changed; update kpdiff)", obj, name))
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// set assigns val to the unexported field name of *obj; nil means the zero value.
func set(obj any, name string, val any) {
	f := field(obj, name)
	if val == nil {
		f.Set(reflect.Zero(f.Type()))
		return
	}
	v := reflect.ValueOf(val)
	if !v.Type().AssignableTo(f.Type()) && v.Type().ConvertibleTo(f.Type()) {
		v = v.Convert(f.Type())
	}
	f.Set(v)
}

// get returns the unexported field name of *obj.
func get(obj any, name string) reflect.Value { return field(obj, name) }

// newOf allocates a zero value of the pointer type of field name of *obj
// (for fields whose type is an unexported struct pointer).
func newOf(obj any, name string) any {
	f := field(obj, name)
	return reflect.New(f.Type().Elem()).Interface()
}

// Command protodata writes the protobuf field table of every kind kube serves (see
// wasmctrl's host/apiserver/data/protobuf.txt for the format), read off the Go types' tags.
package main

import (
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

var special = map[string]string{
	"k8s.io/apimachinery/pkg/apis/meta/v1.Time":                                      "time",
	"k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime":                                 "microtime",
	"k8s.io/apimachinery/pkg/apis/meta/v1.Duration":                                  "duration",
	"k8s.io/apimachinery/pkg/api/resource.Quantity":                                  "quantity",
	"k8s.io/apimachinery/pkg/util/intstr.IntOrString":                                "intorstring",
	"k8s.io/apimachinery/pkg/runtime.RawExtension":                                   "raw",
	"k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1":                                  "raw",
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSON":                  "raw",
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSONSchemaPropsOrArray": "propsorarray",
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSONSchemaPropsOrBool":  "propsorbool",
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSONSchemaPropsOrStringArray": "propsorstrings",
}

var prefixes = []string{"k8s.io/api/", "k8s.io/apimachinery/pkg/apis/", "k8s.io/apiextensions-apiserver/pkg/apis/", "k8s.io/kube-aggregator/pkg/apis/", "k8s.io/apimachinery/pkg/"}

func name(t reflect.Type) string {
	p := t.PkgPath()
	for _, pre := range prefixes {
		p = strings.TrimPrefix(p, pre)
	}
	return p + "." + t.Name()
}

var messages = map[string][]string{}

func scalar(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int32:
		return "int32"
	case reflect.Int64, reflect.Int:
		return "int64"
	case reflect.Uint32:
		return "uint32"
	case reflect.Uint64:
		return "uint64"
	case reflect.Float64:
		return "double"
	case reflect.Float32:
		return "float"
	}
	return ""
}

// typeOf names the type of a value (not its shape).
func typeOf(t reflect.Type) string {
	if s, ok := special[t.PkgPath()+"."+t.Name()]; ok {
		return s
	}
	switch t.Kind() {
	case reflect.Struct:
		walk(t)
		return name(t)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "bytes"
		}
		if t.Name() != "" {
			// A named slice is a message of its own: `repeated <elem> items = 1`.
			return "items:" + typeOf(t.Elem())
		}
	}
	if s := scalar(t.Kind()); s != "" {
		return s
	}
	panic(fmt.Sprintf("no protobuf type for %v", t))
}

func walk(t reflect.Type) {
	n := name(t)
	if _, ok := messages[n]; ok {
		return
	}
	messages[n] = nil
	var lines []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("protobuf")
		if tag == "" {
			continue
		}
		parts := strings.Split(tag, ",")
		num := parts[1]
		js := strings.Split(f.Tag.Get("json"), ",")
		jsname := js[0]
		var flags []string
		for _, o := range js[1:] {
			if o == "omitempty" || o == "inline" {
				flags = append(flags, o)
			}
		}
		ft := f.Type
		if ft.Kind() == reflect.Ptr {
			flags = append(flags, "ptr")
			ft = ft.Elem()
		}
		var ty string
		switch {
		case ft.Kind() == reflect.Map:
			ty = "map:" + typeOf(ft.Key()) + ":" + typeOf(ft.Elem())
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 && (ft.Name() == "" || parts[2] == "rep"):
			flags = append(flags, "rep")
			ty = typeOf(ft.Elem())
		default:
			ty = typeOf(ft)
		}
		if jsname == "" {
			jsname = "-"
		}
		if len(flags) == 0 {
			flags = []string{"-"}
		}
		lines = append(lines, fmt.Sprintf("%s %s %s %s", num, jsname, strings.Join(flags, ","), ty))
	}
	messages[n] = lines
}

func main() {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{scheme.AddToScheme, apiextv1.AddToScheme, apiregv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	if err := metav1.AddMetaToScheme(s); err != nil {
		panic(err)
	}
	var kinds []string
	for gvk, t := range s.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || t.Kind() != reflect.Struct {
			continue
		}
		// Options travel as query parameters, except a delete's; one watch event and status
		// message serve every group.
		options := strings.HasSuffix(gvk.Kind, "Options") && gvk.Kind != "DeleteOptions"
		shared := (gvk.Kind == "WatchEvent" || gvk.Kind == "DeleteOptions" || gvk.Kind == "Status") && gvk.Group != ""
		if options || shared || gvk.Kind == "Table" {
			continue
		}
		walk(t)
		kinds = append(kinds, fmt.Sprintf("kind %s %s %s", gvk.GroupVersion().String(), gvk.Kind, name(t)))
	}
	for _, t := range []reflect.Type{reflect.TypeOf(runtime.Unknown{})} {
		walk(t)
	}
	sort.Strings(kinds)
	out := os.Stdout
	for _, k := range kinds {
		fmt.Fprintln(out, k)
	}
	var names []string
	for n := range messages {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintln(out, "message", n)
		for _, l := range messages[n] {
			fmt.Fprintln(out, l)
		}
	}
}

// Command openapi writes the OpenAPI v3 documents that `kubectl wrapup lint`
// type-checks rules against offline: for each trigger kind with built-in
// expressions whose schema the project can have, the document the API
// server publishes for its group and version (/openapi/v3/...), cut down to
// the kind and what it references. Built-in kinds come from the documents
// Kubernetes publishes in its module (api/openapi-spec/v3) at the version of
// the local control plane; custom resources from their operators' CRDs in
// the modules of the project's module graph, built into OpenAPI v3 as the
// API server of this module's version builds them. Descriptions are
// dropped: type-checking never reads them.
//
//	go run ./openapi -out DIR CRD_FILE...
//
// (run in test/controlplane; the Makefile's schemas target passes the CRD
// files, found in the project's module graph).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"
)

// builtIn are the kinds whose documents Kubernetes publishes.
var builtIn = []schema.GroupVersionKind{
	{Group: "batch", Version: "v1", Kind: "Job"},
	{Group: "", Version: "v1", Kind: "Pod"},
}

const refPrefix = "#/components/schemas/"

// document is the part of an OpenAPI v3 document a schema resolver reads.
type document struct {
	OpenAPI    string `json:"openapi"`
	Components struct {
		Schemas map[string]*spec.Schema `json:"schemas"`
	} `json:"components"`
}

func main() {
	out := flag.String("out", "", "the folder to write the documents to")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "usage: openapi -out DIR CRD_FILE...")
		os.Exit(2)
	}
	if err := run(*out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "openapi:", err)
		os.Exit(1)
	}
}

func run(out string, crdFiles []string) error {
	kubernetes, err := moduleDir("k8s.io/kubernetes")
	if err != nil {
		return err
	}
	docs := map[schema.GroupVersion]*document{}
	roots := map[schema.GroupVersion][]string{}
	for _, gvk := range builtIn {
		gv := gvk.GroupVersion()
		if docs[gv] == nil {
			data, err := os.ReadFile(filepath.Join(kubernetes, "api", "openapi-spec", "v3", strings.ReplaceAll(resourcePath(gv), "/", "__")+"_openapi.json"))
			if err != nil {
				return err
			}
			d := &document{}
			if err := json.Unmarshal(data, d); err != nil {
				return fmt.Errorf("%s: %w", gv, err)
			}
			docs[gv] = d
		}
		ref, err := rootOf(docs[gv], gvk)
		if err != nil {
			return err
		}
		roots[gv] = append(roots[gv], ref)
	}
	for _, file := range crdFiles {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		def := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, def); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		for _, v := range def.Spec.Versions {
			if !v.Served {
				continue
			}
			gvk := schema.GroupVersionKind{Group: def.Spec.Group, Version: v.Name, Kind: def.Spec.Names.Kind}
			built, err := builder.BuildOpenAPIV3(def, v.Name, builder.Options{})
			if err != nil {
				return fmt.Errorf("building the OpenAPI of %s: %w", gvk, err)
			}
			j, err := json.Marshal(built)
			if err != nil {
				return err
			}
			d := &document{}
			if err := json.Unmarshal(j, d); err != nil {
				return err
			}
			gv := gvk.GroupVersion()
			if prev := docs[gv]; prev != nil {
				// Another kind of the same group and version: one
				// document holds both, as the API server publishes them.
				for n, s := range d.Components.Schemas {
					prev.Components.Schemas[n] = s
				}
				d = prev
			}
			docs[gv] = d
			ref, err := rootOf(d, gvk)
			if err != nil {
				return err
			}
			roots[gv] = append(roots[gv], ref)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for gv, d := range docs {
		kept := &document{OpenAPI: d.OpenAPI}
		kept.Components.Schemas = map[string]*spec.Schema{}
		for _, r := range roots[gv] {
			if err := keep(d, r, kept.Components.Schemas); err != nil {
				return fmt.Errorf("%s: %w", gv, err)
			}
		}
		data, err := json.MarshalIndent(kept, "", " ")
		if err != nil {
			return err
		}
		name := filepath.Join(out, strings.ReplaceAll(resourcePath(gv), "/", "__")+".json")
		if err := os.WriteFile(name, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// rootOf names the component of d that is gvk, as the API server's schema
// resolver finds it (x-kubernetes-group-version-kind).
func rootOf(d *document, gvk schema.GroupVersionKind) (string, error) {
	names := make([]string, 0, len(d.Components.Schemas))
	for n := range d.Components.Schemas {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		var gvks []schema.GroupVersionKind
		if err := d.Components.Schemas[n].Extensions.GetObject("x-kubernetes-group-version-kind", &gvks); err != nil {
			return "", err
		}
		for _, g := range gvks {
			if g == gvk {
				return n, nil
			}
		}
	}
	return "", fmt.Errorf("no component of %s", gvk)
}

// keep copies the component name of d, and every component it references,
// into into.
func keep(d *document, name string, into map[string]*spec.Schema) error {
	if _, done := into[name]; done {
		return nil
	}
	s, ok := d.Components.Schemas[name]
	if !ok {
		return fmt.Errorf("no component %s", name)
	}
	strip(s)
	into[name] = s
	var refs []string
	collectRefs(s, &refs)
	for _, r := range refs {
		if err := keep(d, strings.TrimPrefix(r, refPrefix), into); err != nil {
			return err
		}
	}
	return nil
}

func collectRefs(s *spec.Schema, refs *[]string) {
	if s == nil {
		return
	}
	if r := s.Ref.String(); r != "" {
		*refs = append(*refs, r)
	}
	for _, sub := range s.AllOf {
		collectRefs(&sub, refs)
	}
	for _, sub := range s.OneOf {
		collectRefs(&sub, refs)
	}
	for _, sub := range s.AnyOf {
		collectRefs(&sub, refs)
	}
	collectRefs(s.Not, refs)
	for _, p := range s.Properties {
		collectRefs(&p, refs)
	}
	if s.AdditionalProperties != nil {
		collectRefs(s.AdditionalProperties.Schema, refs)
	}
	if s.Items != nil {
		collectRefs(s.Items.Schema, refs)
		for _, sub := range s.Items.Schemas {
			collectRefs(&sub, refs)
		}
	}
}

// strip drops the descriptions, which type-checking never reads, from s.
func strip(s *spec.Schema) {
	if s == nil {
		return
	}
	s.Description = ""
	s.ExternalDocs = nil
	for i := range s.AllOf {
		strip(&s.AllOf[i])
	}
	for i := range s.OneOf {
		strip(&s.OneOf[i])
	}
	for i := range s.AnyOf {
		strip(&s.AnyOf[i])
	}
	strip(s.Not)
	for k, p := range s.Properties {
		strip(&p)
		s.Properties[k] = p
	}
	if s.AdditionalProperties != nil {
		strip(s.AdditionalProperties.Schema)
	}
	if s.Items != nil {
		strip(s.Items.Schema)
		for i := range s.Items.Schemas {
			strip(&s.Items.Schemas[i])
		}
	}
}

func resourcePath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

// moduleDir is the folder of a module of this module's graph, downloaded
// if need be.
func moduleDir(module string) (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", module).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	var info struct{ Dir string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", err
	}
	return info.Dir, nil
}

// Package schemas holds the OpenAPI v3 documents of the trigger kinds with
// built-in expressions, as the API server publishes them, so that rules
// can be type-checked offline exactly as the controller type-checks them
// against a live cluster: Resolver resolves a kind's schema with the same
// code (k8s.io/apiserver's ClientDiscoveryResolver) over these documents
// instead of the server's /openapi/v3.
//
// The documents are generated (make schemas) from the Kubernetes version of
// the local control plane and from the CRDs in the project's module graph;
// make verify fails when they are stale.
package schemas

import (
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

//go:embed openapi/*.json
var documents embed.FS

// Resolver resolves the schemas of the kinds whose documents are shipped.
func Resolver() resolver.SchemaResolver {
	return &resolver.ClientDiscoveryResolver{Discovery: offline{}}
}

// Resolve is the schema of gvk, or an error naming what is shipped.
func Resolve(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	s, err := Resolver().ResolveSchema(gvk)
	if err != nil {
		return nil, fmt.Errorf("%w (shipped: %s)", err, strings.Join(GroupVersions(), ", "))
	}
	return s, nil
}

// GroupVersions lists the groups and versions whose documents are shipped.
func GroupVersions() []string {
	var out []string
	for p := range paths() {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// offline is the part of a discovery client the resolver uses.
type offline struct{ discovery.DiscoveryInterface }

func (offline) OpenAPIV3() openapi.Client { return client{} }

type client struct{}

func (client) Paths() (map[string]openapi.GroupVersion, error) {
	out := map[string]openapi.GroupVersion{}
	for p, file := range paths() {
		out[p] = groupVersion{file: file, path: p}
	}
	return out, nil
}

// paths maps "api/v1", "apis/batch/v1" to the files of their documents.
func paths() map[string]string {
	entries, _ := documents.ReadDir("openapi")
	out := map[string]string{}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".json")
		out[strings.ReplaceAll(name, "__", "/")] = path.Join("openapi", e.Name())
	}
	return out
}

type groupVersion struct{ file, path string }

func (g groupVersion) Schema(contentType string) ([]byte, error) {
	if contentType != "application/json" {
		return nil, fmt.Errorf("only application/json is shipped, not %s", contentType)
	}
	return documents.ReadFile(g.file)
}

func (g groupVersion) ServerRelativeURL() string { return "/openapi/v3/" + g.path }

// Preferred is the version of gk whose schema is shipped, the highest one
// in Kubernetes' order (v1 before v1beta1 before v1alpha1), as a REST
// mapper prefers a CRD's; false when none is.
func Preferred(gk schema.GroupKind) (schema.GroupVersionKind, bool) {
	var best *schema.GroupVersionKind
	for _, gvk := range kinds() {
		if gvk.GroupKind() != gk {
			continue
		}
		if best == nil || version.CompareKubeAwareVersionStrings(gvk.Version, best.Version) > 0 {
			g := gvk
			best = &g
		}
	}
	if best == nil {
		return schema.GroupVersionKind{}, false
	}
	return *best, true
}

// kinds lists the kinds of the shipped documents.
var kinds = sync.OnceValue(func() []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, file := range paths() {
		data, err := documents.ReadFile(file)
		if err != nil {
			continue
		}
		var doc struct {
			Components struct {
				Schemas map[string]struct {
					GVKs []schema.GroupVersionKind `json:"x-kubernetes-group-version-kind"`
				} `json:"schemas"`
			} `json:"components"`
		}
		if json.Unmarshal(data, &doc) != nil {
			continue
		}
		for _, s := range doc.Components.Schemas {
			out = append(out, s.GVKs...)
		}
	}
	return out
})

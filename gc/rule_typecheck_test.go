package gc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	memcache "k8s.io/client-go/discovery/cached/memory"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/openapi"
	"k8s.io/kube-openapi/pkg/validation/spec"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

type countingResolver struct{ calls int }

func (c *countingResolver) ResolveSchema(schema.GroupVersionKind) (*spec.Schema, error) {
	c.calls++
	return &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: map[string]spec.Schema{
		"status": {SchemaProps: spec.SchemaProps{Type: []string{"object"}}},
	}}}, nil
}

// TestTypeCheckIsReused: a rule is reconciled again whenever the AppWrappers
// it decides for change; its type check (a schema resolved, every
// expression checked) is made again only when the rule, its kind's version
// or the schemas (a CRD changed) did.
func TestTypeCheckIsReused(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
	schemas := &countingResolver{}
	r, rule, _ := typeCheckBed(gvk, schemas)
	gk := gvk.GroupKind()
	ctx := context.Background()

	first, err := r.typeCheck(ctx, rule, gk)
	if err != nil || first == nil || schemas.calls != 1 {
		t.Fatalf("first check: %v, %v, %d schema resolutions", first, err, schemas.calls)
	}
	first.Schema = "changed by the caller"
	if again, _ := r.typeCheck(ctx, rule, gk); schemas.calls != 1 || again.Schema != gvk.String() {
		t.Fatalf("the same rule again: %d schema resolutions (want 1), schema %q", schemas.calls, again.Schema)
	}
	rule.Generation = 2
	if r.typeCheck(ctx, rule, gk); schemas.calls != 2 {
		t.Fatalf("a new generation: %d schema resolutions, want 2", schemas.calls)
	}
	r.schemaEpoch.Add(1) // a CRD changed
	if r.typeCheck(ctx, rule, gk); schemas.calls != 3 {
		t.Fatalf("after a CRD changed: %d schema resolutions, want 3", schemas.calls)
	}
	rule.UID = "uid-2" // deleted and created again under the same name
	if r.typeCheck(ctx, rule, gk); schemas.calls != 4 {
		t.Fatalf("a rule created again: %d schema resolutions, want 4", schemas.calls)
	}
}

// flakyOpenAPI serves batch/v1's OpenAPI document, failing its first
// fetch of the paths as a busy API server does.
type flakyOpenAPI struct {
	fakediscovery.FakeDiscovery
	paths int
}

func (f *flakyOpenAPI) OpenAPIV3() openapi.Client { return f }

func (f *flakyOpenAPI) Paths() (map[string]openapi.GroupVersion, error) {
	f.paths++
	if f.paths == 1 {
		return nil, apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	}
	return map[string]openapi.GroupVersion{"apis/batch/v1": batchV1Doc{}}, nil
}

type batchV1Doc struct{}

func (batchV1Doc) ServerRelativeURL() string { return "/openapi/v3/apis/batch/v1?hash=1" }

func (batchV1Doc) Schema(string) ([]byte, error) {
	return []byte(`{"components":{"schemas":{"io.k8s.api.batch.v1.Job":{"type":"object",
		"x-kubernetes-group-version-kind":[{"group":"batch","version":"v1","kind":"Job"}],
		"properties":{"status":{"type":"object","properties":{"succeeded":{"type":"integer"}}}}}}}}`), nil
}

// TestTypeCheckRetriesASchemaNotRead: the cached discovery keeps a failed
// fetch of the OpenAPI paths, so a rule reconciled while the API server
// was busy stayed with no status.typeChecking (and its warnings unsaid)
// until a CRD changed. The failure is now an error (the rule is reconciled
// again) and drops the cache, so the next try reads afresh.
func TestTypeCheckRetriesASchemaNotRead(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
	server := &flakyOpenAPI{}
	cached := memcache.NewMemCacheClient(server)
	r, rule, _ := typeCheckBed(gvk, &resolver.ClientDiscoveryResolver{Discovery: cached})
	r.Invalidate = cached.Invalidate
	rule.Spec.Success = "object.status.succeded > 0"
	ctx := context.Background()

	if tc, err := r.typeCheck(ctx, rule, gvk.GroupKind()); tc != nil || err == nil {
		t.Fatalf("with the paths not read: %v, %v; want no result and an error, to be tried again", tc, err)
	}
	tc, err := r.typeCheck(ctx, rule, gvk.GroupKind())
	if err != nil || tc == nil || len(tc.ExpressionWarnings) != 1 {
		t.Fatalf("tried again: %v, %v; want the type check, with one warning (succeded)", tc, err)
	}
	if server.paths != 2 {
		t.Fatalf("the paths were fetched %d times, want 2", server.paths)
	}
}

// TestTypeCheckWaitsForANewCRDsSchema: a kind with no published schema is
// not type-checked, and not asked again; just after a CRD of its group
// changed, the API server may not publish its schema yet, and the rule
// is type-checked again soon.
func TestTypeCheckWaitsForANewCRDsSchema(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Run"}
	r, rule, invalidated := typeCheckBed(gvk, missingSchemas{})
	ctx := context.Background()

	if tc, err := r.typeCheck(ctx, rule, gvk.GroupKind()); tc != nil || err != nil || *invalidated != 0 {
		t.Fatalf("no schema published: %v, %v, %d invalidations; want nothing checked, nothing retried", tc, err, *invalidated)
	}
	r.crdSeen.Store(gvk.Group, time.Now())
	_, err := r.typeCheck(ctx, rule, gvk.GroupKind())
	var lag *schemaLagError
	if !errors.As(err, &lag) || *invalidated != 1 {
		t.Fatalf("just after its CRD changed: %v, %d invalidations; want a schemaLagError and one", err, *invalidated)
	}
	r.crdSeen.Store(gvk.Group, time.Now().Add(-crdSettle))
	if tc, err := r.typeCheck(ctx, rule, gvk.GroupKind()); tc != nil || err != nil {
		t.Fatalf("long after its CRD changed: %v, %v; want nothing checked, nothing retried", tc, err)
	}
}

type missingSchemas struct{}

// TestTypeCheckGivesUpOnALastingError: an error that a later read would
// meet again (a refused /openapi/v3) is not retried: the rule is not
// type-checked, as without a schema.
func TestTypeCheckGivesUpOnALastingError(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
	r, rule, invalidated := typeCheckBed(gvk, refusedSchemas{})
	if tc, err := r.typeCheck(context.Background(), rule, gvk.GroupKind()); tc != nil || err != nil || *invalidated != 0 {
		t.Fatalf("/openapi/v3 refused: %v, %v, %d invalidations; want nothing checked, nothing retried", tc, err, *invalidated)
	}
}

func (missingSchemas) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	return nil, fmt.Errorf("cannot resolve group version %q: %w", gvk.GroupVersion(), resolver.ErrSchemaNotFound)
}

// refusedSchemas: /openapi/v3 refused, as a hardened RBAC may.
type refusedSchemas struct{}

func (refusedSchemas) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	return nil, apierrors.NewForbidden(schema.GroupResource{}, "/openapi/v3", errors.New("not allowed"))
}

// typeCheckBed is a rule controller that maps gvk and reads schemas, with
// a rule of gvk's kind, and the count of its cache invalidations.
func typeCheckBed(gvk schema.GroupVersionKind, schemas resolver.SchemaResolver) (*ruleReconciler, *wrapupv1alpha1.CompletionRule, *int) {
	mapper := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{gvk.GroupVersion()})
	mapper.Add(gvk, apimeta.RESTScopeNamespace)
	invalidated := new(int)
	r := &ruleReconciler{Mapper: mapper, Schemas: schemas, Invalidate: func() { *invalidated++ }}
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "rule", UID: "uid-1", Generation: 1},
		Spec: wrapupv1alpha1.CompletionRuleSpec{Trigger: wrapupv1alpha1.TriggerSpec{APIGroup: gvk.Group, Kind: gvk.Kind}}}
	return r, rule, invalidated
}

// TestTransient: the schema reads tried again are those a later read may
// not meet.
func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewServiceUnavailable("busy"), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewTimeoutError("timeout", 1), true},
		{apierrors.NewInternalError(errors.New("boom")), true},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), true},
		{context.DeadlineExceeded, true},
		{apierrors.NewForbidden(schema.GroupResource{}, "/openapi/v3", errors.New("RBAC")), false},
		{apierrors.NewNotFound(schema.GroupResource{}, "/openapi/v3"), false},
		{&json.SyntaxError{}, false},
	} {
		if got := transient(c.err); got != c.want {
			t.Errorf("transient(%T %v) = %v, want %v", c.err, c.err, got, c.want)
		}
	}
}

package gc

import (
	"context"
	"errors"
	"fmt"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/read"
	"github.com/wrapup-dev/wrapup/gc/triggers"
)

// cacheView reads from the controller's caches: the manager's for
// AppWrappers, rules and Namespaces, the trigger watches for triggers. A
// rule that reads more of a trigger or of the AppWrapper than the caches
// keep is given what the API server has.
type cacheView struct {
	r *appWrapperReconciler
	// key is the AppWrapper decided on: the owner of the watch of its
	// annotated trigger's kind.
	key types.NamespacedName
	// mem is the AppWrapper's memory entry, which remembers the watches
	// claimed for it.
	mem *awMemory
}

// AppWrapper reads the AppWrapper from the cache; one that wrapup deleted
// counts as gone.
func (v *cacheView) AppWrapper(ctx context.Context, key types.NamespacedName) (*awv1beta2.AppWrapper, error) {
	aw, err := (&read.Reader{Client: v.r.Cache}).AppWrapper(ctx, key)
	switch {
	case err != nil:
		return nil, err
	case aw == nil:
		v.r.own.gone(key)
	case v.r.own.isDeleted(key, aw.UID):
		return nil, nil
	}
	return aw, nil
}

// Record reads the run's CompletionRecord from the cache.
func (v *cacheView) Record(ctx context.Context, aw *awv1beta2.AppWrapper) (*wrapupv1alpha1.CompletionRecord, error) {
	return read.ReadRecord(ctx, v.r.Cache, aw)
}

func (v *cacheView) Rules(ctx context.Context) ([]wrapupv1alpha1.CompletionRule, error) {
	return (&read.Reader{Client: v.r.Cache}).Rules(ctx)
}

func (v *cacheView) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	return read.ReadNamespace(ctx, v.r.Cache, name)
}

func (v *cacheView) Kind(gk schema.GroupKind) decision.Kind { return v.r.Triggers.Kind(gk) }

func (v *cacheView) Worker(ctx context.Context, key types.NamespacedName, aw *awv1beta2.AppWrapper) (*decision.Worker, read.TriggerView) {
	w, c := v.r.readWorker(ctx, false, aw)
	if c == nil || w.Problem != "" {
		return w, nil
	}
	return w, &workerCacheView{r: v.r, key: key, mem: v.mem, c: c}
}

// workerCacheView reads triggers from the watches on a worker cluster,
// claimed for the AppWrapper key (of every kind it reads there: the rules
// claim kinds on this cluster's watches only).
type workerCacheView struct {
	r   *appWrapperReconciler
	key types.NamespacedName
	mem *awMemory
	c   *workerConn
}

func (v *workerCacheView) Kind(gk schema.GroupKind) decision.Kind { return v.c.triggers.Kind(gk) }

// Claim watches gk (keeping fields) on the worker for the AppWrapper; a
// kind that cannot be watched there is no error. mem remembers the claim
// first, so that it is released with the AppWrapper whatever happens to
// the reconcile; its claims on another worker are released before.
func (v *workerCacheView) Claim(gk schema.GroupKind, fields celpolicies.Fields) error {
	if v.mem.worker != v.c.cluster {
		v.r.releaseWorker(v.key, v.mem)
		v.mem.worker = v.c.cluster
	}
	if err := v.c.triggers.Ensure(triggers.AppWrapperOwner(v.key, gk), gk, fields); err != nil && !triggers.KindState(err) {
		return fmt.Errorf("watching %s on worker cluster %s: %w", gk, v.c.cluster, err)
	}
	return nil
}

// Trigger claims the kind of ref, and reads the trigger.
func (v *workerCacheView) Trigger(ctx context.Context, aw *awv1beta2.AppWrapper, ref decision.Ref, fields celpolicies.Fields) (decision.Trigger, error) {
	claim := func() error { return v.Claim(ref.Kind, fields) }
	return readCached(ctx, v.c.triggers, v.key, aw, ref, fields, claim, liveView(v.c.reader, v.c.triggers))
}

// readCached reads the trigger ref of aw (the AppWrapper key) from the
// trigger cache tc, or through live when tc drops fields it reads. claim,
// when set, first claims ref's kind on tc: no trigger is read of a kind
// not served or not watchable.
func readCached(ctx context.Context, tc triggerCache, key types.NamespacedName, aw *awv1beta2.AppWrapper, ref decision.Ref, fields celpolicies.Fields,
	claim func() error, live read.TriggerView) (decision.Trigger, error) {
	t := decision.Trigger{Ref: ref}
	if claim != nil {
		if err := claim(); err != nil {
			return t, err
		}
		if k := tc.Kind(ref.Kind); k.State == decision.KindNotServed || k.State == decision.KindNotWatchable {
			return t, nil
		}
	}
	obj, synced, err := tc.Get(ref.Kind, aw.Namespace, ref.Name, fields)
	switch {
	case err == nil && !synced:
		// Its first list is under way: it tells this AppWrapper when done.
		tc.Wait(ref.Kind, key)
		t.State = decision.TriggerPending
		return t, nil
	case errors.Is(err, triggers.ErrFieldsNotKept):
		// A rule reads more than the kind's informer, started before
		// it, keeps: read this one from the API server.
		return live.Trigger(ctx, aw, ref, fields)
	case err != nil:
		return t, err
	case obj == nil:
		t.State = decision.TriggerAbsent
	default:
		t.State, t.Object = decision.TriggerPresent, obj
	}
	return t, nil
}

func (v *cacheView) RuleKind(_ *wrapupv1alpha1.CompletionRule, gk schema.GroupKind) decision.Kind {
	return v.Kind(gk)
}

// Trigger reads the trigger from the trigger watches.
func (v *cacheView) Trigger(ctx context.Context, aw *awv1beta2.AppWrapper, ref decision.Ref, fields celpolicies.Fields) (decision.Trigger, error) {
	var claim func() error
	if ref.Annotated {
		// The rule does not name the kind: this AppWrapper's annotated
		// component does, so the AppWrapper holds the watch on it.
		claim = func() error {
			if err := v.r.Triggers.Ensure(triggers.AppWrapperOwner(v.key, ref.Kind), ref.Kind, fields); err != nil && !triggers.KindState(err) {
				return err
			}
			return nil
		}
	}
	return readCached(ctx, v.r.Triggers, v.key, aw, ref, fields, claim, v.r.liveViewAhead(nil))
}

// AppWrapperVariable returns the appWrapper variable of aw: wrapup's
// cache (CacheOptions) keeps of the annotations, spec and status only what
// wrapup reads, so a rule that reads them is given the AppWrapper read
// from the API server (read.FullAppWrapperVariable).
func (v *cacheView) AppWrapperVariable(ctx context.Context, aw *awv1beta2.AppWrapper, p *celpolicies.Policy) (map[string]any, error) {
	return read.FullAppWrapperVariable(ctx, v.r.APIReader, aw, p)
}

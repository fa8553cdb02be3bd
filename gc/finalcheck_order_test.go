package gc

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/read"
)

// A final check that reads the AppWrapper lists the rules only once the
// AppWrapper is answered: the rules are then at least as new as the
// AppWrapper decided on, so a rule edit made before a change of the
// AppWrapper (dryRun set, then an ignore annotation removed) is seen with
// that change, and the AppWrapper's later changes fail the preconditions
// of the writes. Sending the LIST first, for the AppWrapper to be read
// while it waits, fails this test, as does reading a trigger ahead before
// the AppWrapper.
func TestFinalCheckListsTheRulesAfterItReadsTheAppWrapper(t *testing.T) {
	ctx := context.Background()
	fc := historyBed(t)
	aw := &awv1beta2.AppWrapper{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", UID: "aw-uid"}}
	if err := fc.Create(ctx, aw); err != nil {
		t.Fatal(err)
	}
	var awRead, listed atomic.Bool
	reader := interceptor.NewClient(fc, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*unstructured.Unstructured); ok {
				if !awRead.Load() {
					t.Error("a trigger was read ahead before the AppWrapper was read")
				}
				return apierrors.NewNotFound(schema.GroupResource{Group: "batch", Resource: "jobs"}, key.Name)
			}
			err := c.Get(ctx, key, obj, opts...)
			if _, ok := obj.(*awv1beta2.AppWrapper); ok {
				awRead.Store(true)
			}
			return err
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*wrapupv1alpha1.CompletionRuleList); ok {
				listed.Store(true)
				if !awRead.Load() {
					t.Error("the rules were listed before the AppWrapper was read")
				}
			}
			return c.List(ctx, list, opts...)
		},
	})
	r := &appWrapperReconciler{Cache: fc, Writer: fc, APIReader: reader, Recorder: events.NewFakeRecorder(8), Counters: nopCounter{},
		Policies: &celpolicies.Cache{}, Triggers: mkNoTriggers{}, Assign: newAssignments()}
	r.defaults()
	// The reads ahead are sent as they are started, so that one started
	// too soon is seen to be.
	r.readAhead = func(start func()) { start() }
	var mem awMemory
	// A trigger read ahead is read after the AppWrapper too: it would
	// otherwise be older than the AppWrapper decided on.
	ahead := &read.Ahead{Refs: []decision.Ref{{Kind: schema.GroupKind{Group: "batch", Kind: "Job"}, Version: "v1", Name: "bench", Template: "bench"}}}
	in, _, err := r.decideFresh(ctx, types.NamespacedName{Namespace: "ns", Name: "run"}, &mem, ahead)
	if err != nil {
		t.Fatal(err)
	}
	if in.AppWrapper == nil || in.AppWrapper.UID != "aw-uid" || !listed.Load() {
		t.Fatalf("the final check read %v, listed the rules: %v", in.AppWrapper, listed.Load())
	}
}

// readAheadBed is a final check's world: an AppWrapper whose Job
// component "bench" has completed, and a rule that deletes on success.
// get and list, when set, see the final check's reads of a Job and of
// the rules before they are answered.
func readAheadBed(t *testing.T, get func(ctx context.Context, name string), list func(), edit ...func(*wrapupv1alpha1.CompletionRule)) (*appWrapperReconciler, *awv1beta2.AppWrapper, *wrapupv1alpha1.CompletionRule) {
	t.Helper()
	ctx := context.Background()
	fc := historyBed(t)
	aw := &awv1beta2.AppWrapper{
		ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", UID: "aw-uid"},
		Spec:       awv1beta2.AppWrapperSpec{Components: []awv1beta2.AppWrapperComponent{jobComponent(t, "batch/v1", "Job", "bench")}},
		Status:     awv1beta2.AppWrapperStatus{Phase: awv1beta2.AppWrapperRunning},
	}
	rule := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "jobs", UID: "uid-jobs"}}
	rule.Spec.Trigger = wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job"}
	rule.Spec.OnSuccess = wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll}
	for _, e := range edit {
		e(rule)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"team": "a"}}}
	for _, o := range []client.Object{aw, rule, ns} {
		if err := fc.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	reader := interceptor.NewClient(fc, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok || u.GetKind() != "Job" {
				return c.Get(ctx, key, obj, opts...)
			}
			if get != nil {
				get(ctx, key.Name)
			}
			if key != (client.ObjectKey{Namespace: "ns", Name: "bench"}) {
				return apierrors.NewNotFound(schema.GroupResource{Group: "batch", Resource: "jobs"}, key.Name)
			}
			u.SetName(key.Name)
			u.SetNamespace(key.Namespace)
			u.SetUID("job-uid")
			u.SetLabels(map[string]string{awv1beta2.AppWrapperLabel: "run"})
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "workload.codeflare.dev/v1beta2", Kind: "AppWrapper", Name: "run", UID: "aw-uid", Controller: ptr.To(true)}})
			u.Object["status"] = map[string]any{"conditions": []any{
				map[string]any{"type": "SuccessCriteriaMet", "status": "True"}, map[string]any{"type": "Complete", "status": "True"}}}
			return nil
		},
		List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
			if _, ok := l.(*wrapupv1alpha1.CompletionRuleList); ok && list != nil {
				list()
			}
			return c.List(ctx, l, opts...)
		},
	})
	r := &appWrapperReconciler{Cache: fc, Writer: fc, APIReader: reader, Recorder: events.NewFakeRecorder(8), Counters: nopCounter{},
		Policies: &celpolicies.Cache{}, Triggers: mkNoTriggers{}, Assign: newAssignments()}
	r.defaults()
	if err := fc.Get(ctx, client.ObjectKeyFromObject(aw), aw); err != nil {
		t.Fatal(err)
	}
	return r, aw, rule
}

// aheadOfJob is a read ahead of the Job name, chosen on rule as the
// caches had it.
func aheadOfJob(name string, rule *wrapupv1alpha1.CompletionRule) *read.Ahead {
	return &read.Ahead{Refs: []decision.Ref{{Kind: schema.GroupKind{Group: "batch", Kind: "Job"}, Version: "v1", Name: name, Template: name}},
		Rules: map[types.UID]string{rule.UID: rule.ResourceVersion}}
}

// The final check sends its read of the trigger a decision on the caches
// read without waiting for the rules' LIST: here the LIST is answered
// only once the trigger's GET has been sent, which a final check that
// reads the trigger after the rules never does (it fails at the
// deadline). The decision uses that read, and sends no other.
func TestFinalCheckReadsTheTriggerWhileItListsTheRules(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sent, stop := make(chan struct{}), make(chan struct{})
	// The LIST is sent from a goroutine of the rules' reader, which
	// outlives a check whose deadline passed: it is let go at the end.
	defer close(stop)
	var gets atomic.Int32
	r, aw, rule := readAheadBed(t, func(context.Context, string) {
		if gets.Add(1) == 1 {
			close(sent)
		}
	}, func() {
		select {
		case <-sent:
		case <-stop:
		}
	})
	var mem awMemory
	in, d, err := r.decideFresh(ctx, client.ObjectKeyFromObject(aw), &mem, aheadOfJob("bench", rule))
	if err != nil {
		t.Fatalf("the rules' LIST, answered once the trigger's read is sent, was not: %v", err)
	}
	if len(in.Triggers) != 1 || in.Triggers[0].State != decision.TriggerPresent || d.Write == nil || d.Verdict != decision.VerdictDelete {
		t.Fatalf("the final check read %+v and decided %s (%s)", in.Triggers, d.Verdict, d.Reason)
	}
	if n := gets.Load(); n != 1 {
		t.Fatalf("the final check read the trigger %d times, want once", n)
	}
}

// A read ahead of a trigger the plan on the rules as listed does not read
// (the decision on the caches named another: an AppWrapper or a rule
// changed since) is not used: the plan's trigger is read, and the check
// returns only once the read ahead has ended (here, once cancelled).
func TestFinalCheckDropsAReadAheadThePlanDoesNotRead(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var readJobs []string
	r, aw, rule := readAheadBed(t, func(ctx context.Context, name string) {
		if name == "other" {
			<-ctx.Done()
		}
		mu.Lock()
		defer mu.Unlock()
		readJobs = append(readJobs, name)
	}, nil)
	var mem awMemory
	in, d, err := r.decideFresh(ctx, client.ObjectKeyFromObject(aw), &mem, aheadOfJob("other", rule))
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Triggers) != 1 || in.Triggers[0].Ref.Name != "bench" || in.Triggers[0].State != decision.TriggerPresent || d.Verdict != decision.VerdictDelete {
		t.Fatalf("the final check read %+v and decided %s (%s)", in.Triggers, d.Verdict, d.Reason)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(readJobs)
	if !slices.Equal(readJobs, []string{"bench", "other"}) {
		t.Fatalf("the final check's reads of Jobs ended by the time it returned: %v, want bench and other", readJobs)
	}
}

// When the rules listed (or the Namespace read) are not those the read
// ahead was chosen on (one changed since the caches had it: perhaps after
// the read ahead was answered), the trigger is read again once they are
// read, so that a change of it made before theirs is seen with theirs.
// When they are the same, the read ahead is the only read.
func TestFinalCheckReadsTheTriggerAgainAfterARuleChange(t *testing.T) {
	selects := func(r *wrapupv1alpha1.CompletionRule) {
		r.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	}
	for _, tc := range []struct {
		name string
		// edit makes the rule as the bed creates it.
		edit []func(*wrapupv1alpha1.CompletionRule)
		// cached makes what the caches had from the rule and the
		// Namespace as created.
		cached func(rule *wrapupv1alpha1.CompletionRule, ns *corev1.Namespace) *read.Ahead
		again  bool
	}{{
		name: "the caches' rules",
		cached: func(rule *wrapupv1alpha1.CompletionRule, _ *corev1.Namespace) *read.Ahead {
			return aheadOfJob("bench", rule)
		},
	}, {
		name: "the caches' rules and Namespace",
		edit: []func(*wrapupv1alpha1.CompletionRule){selects},
		cached: func(rule *wrapupv1alpha1.CompletionRule, ns *corev1.Namespace) *read.Ahead {
			a := aheadOfJob("bench", rule)
			a.Namespace = ns.ResourceVersion
			return a
		},
	}, {
		name: "a rule changed",
		cached: func(rule *wrapupv1alpha1.CompletionRule, _ *corev1.Namespace) *read.Ahead {
			a := aheadOfJob("bench", rule)
			a.Rules[rule.UID] = "0"
			return a
		},
		again: true,
	}, {
		name: "a rule deleted, another created",
		cached: func(rule *wrapupv1alpha1.CompletionRule, _ *corev1.Namespace) *read.Ahead {
			a := aheadOfJob("bench", rule)
			a.Rules = map[types.UID]string{"uid-before": rule.ResourceVersion}
			return a
		},
		again: true,
	}, {
		name: "a rule deleted",
		cached: func(rule *wrapupv1alpha1.CompletionRule, _ *corev1.Namespace) *read.Ahead {
			a := aheadOfJob("bench", rule)
			a.Rules["uid-deleted"] = "3"
			return a
		},
		again: true,
	}, {
		name: "the Namespace changed",
		edit: []func(*wrapupv1alpha1.CompletionRule){selects},
		cached: func(rule *wrapupv1alpha1.CompletionRule, _ *corev1.Namespace) *read.Ahead {
			a := aheadOfJob("bench", rule)
			a.Namespace = "0"
			return a
		},
		again: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var listed atomic.Bool
			var mu sync.Mutex
			var afterList []bool
			r, aw, rule := readAheadBed(t, func(context.Context, string) {
				mu.Lock()
				defer mu.Unlock()
				afterList = append(afterList, listed.Load())
			}, func() { listed.Store(true) }, tc.edit...)
			ns := &corev1.Namespace{}
			if err := r.Cache.Get(ctx, types.NamespacedName{Name: "ns"}, ns); err != nil {
				t.Fatal(err)
			}
			var mem awMemory
			in, d, err := r.decideFresh(ctx, client.ObjectKeyFromObject(aw), &mem, tc.cached(rule, ns))
			if err != nil {
				t.Fatal(err)
			}
			if len(in.Triggers) != 1 || in.Triggers[0].State != decision.TriggerPresent || d.Verdict != decision.VerdictDelete {
				t.Fatalf("the final check read %+v and decided %s (%s)", in.Triggers, d.Verdict, d.Reason)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case tc.again && (len(afterList) != 2 || !afterList[1]):
				t.Fatalf("the trigger's reads, each sent after the rules' LIST or not: %v; want one ahead and one after", afterList)
			case !tc.again && len(afterList) != 1:
				t.Fatalf("the trigger was read %d times, want once (ahead)", len(afterList))
			}
		})
	}
}

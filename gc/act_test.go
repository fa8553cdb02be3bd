package gc

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/test/util"
)

func jobComponent(t *testing.T, apiVersion, kind, name string) awv1beta2.AppWrapperComponent {
	raw, err := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}})
	if err != nil {
		t.Fatal(err)
	}
	return awv1beta2.AppWrapperComponent{Template: runtime.RawExtension{Raw: raw}}
}

// actBed is the AppWrapper controller on a fake API server, which its
// caches read as it is: a Running AppWrapper ns/run whose Job component
// "bench" is read from jobs, a rule "jobs" that takes it as the trigger
// (DeleteAll 300 s after either outcome), and what the controller writes
// and counts.
type actBed struct {
	t     *testing.T
	g     Gomega
	ctx   context.Context
	fc    client.WithWatch
	r     *appWrapperReconciler
	jobs  mapTriggers
	clock *clocktesting.FakeClock
	aw    *awv1beta2.AppWrapper
	rule  *wrapupv1alpha1.CompletionRule
	// counted are the outcomes the controller counted, as rule/outcome.
	counted []string
	// creates, updates and patches count the writes that reached the
	// API server (answered or not); the hooks, when set, run in their place.
	creates, updates, patches int
	onCreate, onUpdate        func(ctx context.Context, c client.WithWatch, obj client.Object) error
	// updatedOn are the resourceVersions the record updates were sent on.
	updatedOn []string
}

var actStart = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func newActBed(t *testing.T, edit ...func(*wrapupv1alpha1.CompletionRule)) *actBed {
	t.Helper()
	b := &actBed{t: t, g: NewWithT(t), ctx: context.Background(), fc: historyBed(t), jobs: mapTriggers{}, clock: clocktesting.NewFakeClock(actStart)}
	b.rule = &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "jobs", UID: "rule-uid"},
		Spec: wrapupv1alpha1.CompletionRuleSpec{Trigger: wrapupv1alpha1.TriggerSpec{APIGroup: "batch", Kind: "Job"},
			OnSuccess: wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll, TTLSecondsAfterFinished: ptr.To[int32](300)},
			OnFailure: wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll, TTLSecondsAfterFinished: ptr.To[int32](300)}}}
	for _, e := range edit {
		e(b.rule)
	}
	b.aw = &awv1beta2.AppWrapper{
		ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", UID: "aw-uid", CreationTimestamp: metav1.NewTime(actStart.Add(-time.Hour))},
		Spec:       awv1beta2.AppWrapperSpec{Components: []awv1beta2.AppWrapperComponent{jobComponent(t, "batch/v1", "Job", "bench")}},
		Status:     awv1beta2.AppWrapperStatus{Phase: awv1beta2.AppWrapperRunning},
	}
	for _, o := range []client.Object{b.rule, b.aw, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}} {
		b.g.Expect(b.fc.Create(b.ctx, o)).To(Succeed())
	}
	writer := interceptor.NewClient(b.fc, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			b.creates++
			if b.onCreate != nil {
				return b.onCreate(ctx, c, obj)
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			b.updates++
			b.updatedOn = append(b.updatedOn, obj.GetResourceVersion())
			if b.onUpdate != nil {
				return b.onUpdate(ctx, c, obj)
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			b.patches++
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	b.r = &appWrapperReconciler{Cache: b.fc, Writer: writer, APIReader: &unstructuredReader{b.fc, b.jobs, &atomic.Int64{}},
		Recorder: events.NewFakeRecorder(64), Policies: &celpolicies.Cache{}, Triggers: b.jobs, Assign: newAssignments(),
		Counters: countingCounter{&b.counted}, Clock: b.clock}
	b.r.defaults()
	return b
}

type countingCounter struct{ counted *[]string }

func (c countingCounter) Add(_ context.Context, rule string, outcome wrapupv1alpha1.Outcome) {
	*c.counted = append(*c.counted, rule+"/"+string(outcome))
}

// job sets the Job bench, of UID uid, Running ("") or finished so.
func (b *actBed) job(uid types.UID, outcome wrapupv1alpha1.Outcome) {
	status := map[string]any{"active": int64(1)}
	if outcome != "" {
		cond := map[wrapupv1alpha1.Outcome][2]string{wrapupv1alpha1.OutcomeSucceeded: {"SuccessCriteriaMet", "Complete"},
			wrapupv1alpha1.OutcomeFailed: {"FailureTarget", "Failed"}}[outcome]
		status = map[string]any{"conditions": []any{map[string]any{"type": cond[0], "status": "True"}, map[string]any{"type": cond[1], "status": "True"}}}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "status": status}}
	u.SetName("bench")
	u.SetNamespace("ns")
	u.SetUID(uid)
	u.SetLabels(map[string]string{awv1beta2.AppWrapperLabel: "run"})
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: awv1beta2.GroupVersion.String(), Kind: "AppWrapper", Name: "run", UID: "aw-uid", Controller: ptr.To(true)}})
	b.jobs["Job.batch/ns/bench"] = u
}

// reconcile reconciles the AppWrapper at actStart+at.
func (b *actBed) reconcile(at time.Duration) ctrl.Result {
	b.t.Helper()
	b.clock.SetTime(actStart.Add(at))
	res, err := b.r.Reconcile(b.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b.aw)})
	b.g.Expect(err).NotTo(HaveOccurred())
	return res
}

// record is the run's CompletionRecord; nil when there is none.
func (b *actBed) record() *wrapupv1alpha1.CompletionRecord {
	b.t.Helper()
	cr := &wrapupv1alpha1.CompletionRecord{}
	err := b.fc.Get(b.ctx, types.NamespacedName{Namespace: "ns", Name: wrapupv1alpha1.RecordName("run", "aw-uid")}, cr)
	if apierrors.IsNotFound(err) {
		return nil
	}
	b.g.Expect(err).NotTo(HaveOccurred())
	return cr
}

// appWrapper is the AppWrapper as the API server has it; nil when gone.
func (b *actBed) appWrapper() *awv1beta2.AppWrapper {
	b.t.Helper()
	aw := &awv1beta2.AppWrapper{}
	err := b.fc.Get(b.ctx, client.ObjectKeyFromObject(b.aw), aw)
	if apierrors.IsNotFound(err) {
		return nil
	}
	b.g.Expect(err).NotTo(HaveOccurred())
	return aw
}

// store creates cr on the API server, as an earlier reconcile would have.
func (b *actBed) store(cr *wrapupv1alpha1.CompletionRecord) {
	b.t.Helper()
	cr = cr.DeepCopy()
	cr.ResourceVersion = ""
	b.g.Expect(b.fc.Create(b.ctx, cr)).To(Succeed())
}

// The controller records an outcome by creating the run's CompletionRecord
// (the outcome, the deciding rule, the trigger by index and UID, the
// finish time as it saw it, the action in force and when it deletes),
// counts it once, at the create, and mirrors it on the AppWrapper's
// metadata; later decisions on the record write and count nothing, until
// it deletes the AppWrapper when due.
func TestActRecordsByCreateAndCountsOnce(t *testing.T) {
	b := newActBed(t)
	g := b.g
	b.job("job-1", wrapupv1alpha1.OutcomeSucceeded)
	res := b.reconcile(0)
	g.Expect(res.RequeueAfter).To(Equal(300 * time.Second))
	cr := b.record()
	g.Expect(cr).NotTo(BeNil())
	g.Expect(cr.Outcome).To(Equal(wrapupv1alpha1.OutcomeSucceeded))
	g.Expect(cr.RuleUID).To(Equal(types.UID("rule-uid")))
	g.Expect(cr.AppWrapper.UID).To(Equal(types.UID("aw-uid")))
	g.Expect(cr.FinishedAt.Time).To(BeTemporally("==", actStart))
	g.Expect(recordedTriggers(cr)).To(Equal([]simRecTrig{{index: 0, uid: "job-1"}}))
	g.Expect(cr.Action.Action).To(Equal(wrapupv1alpha1.ActionDeleteAll))
	g.Expect(cr.Action.DeleteAfter).NotTo(BeNil())
	g.Expect(cr.Action.DeleteAfter.Time).To(BeTemporally("==", actStart.Add(300*time.Second)))
	g.Expect(b.counted).To(Equal([]string{"jobs/Succeeded"}))
	g.Expect([]int{b.creates, b.updates, b.patches}).To(Equal([]int{1, 0, 1}), "creates, updates, patches")
	aw := b.appWrapper()
	g.Expect(aw.Labels).To(HaveKeyWithValue(wrapupv1alpha1.OutcomeLabel, "Succeeded"))
	g.Expect(aw.Annotations).To(HaveKeyWithValue(wrapupv1alpha1.RuleAnnotation, "jobs"))

	for _, at := range []time.Duration{time.Second, time.Minute, 299 * time.Second} {
		res = b.reconcile(at)
		g.Expect(res.RequeueAfter).To(Equal(300*time.Second-at), "at %s", at)
	}
	g.Expect(b.counted).To(HaveLen(1))
	g.Expect([]int{b.creates, b.updates, b.patches}).To(Equal([]int{1, 0, 1}), "creates, updates, patches")
	g.Expect(b.appWrapper()).NotTo(BeNil())

	b.reconcile(300 * time.Second)
	g.Expect(b.appWrapper()).To(BeNil())
	g.Expect(b.counted).To(HaveLen(1))
	g.Expect(b.record()).NotTo(BeNil(), "the record outlives its AppWrapper (its history)")
}

// A create answered AlreadyExists (another process, or this one before a
// restart, recorded the run meanwhile) counts nothing and mirrors nothing:
// the controller looks again, and decides on the stored record, whatever
// it would have recorded itself: here an earlier success whose deletion
// is due.
func TestActAlreadyExistsDecidesOnTheStoredRecord(t *testing.T) {
	b := newActBed(t)
	g := b.g
	b.job("job-1", wrapupv1alpha1.OutcomeSucceeded)
	earlier := util.MakeRecord(b.aw, b.rule, wrapupv1alpha1.OutcomeSucceeded, actStart.Add(-10*time.Minute)).Trigger(0, "job-1").Obj()
	b.onCreate = func(ctx context.Context, c client.WithWatch, obj client.Object) error {
		// The other writer's create lands first.
		g.Expect(c.Create(ctx, earlier.DeepCopy())).To(Succeed())
		return c.Create(ctx, obj)
	}
	res := b.reconcile(0)
	g.Expect(res.Requeue).To(BeTrue()) //nolint:staticcheck // the controller's answer to a write that lost a race
	g.Expect(b.counted).To(BeEmpty())
	g.Expect(b.patches).To(BeZero())
	g.Expect(b.record().FinishedAt.Time).To(BeTemporally("==", earlier.FinishedAt.Time))

	b.onCreate = nil
	b.reconcile(5 * time.Millisecond)
	g.Expect(b.appWrapper()).To(BeNil(), "the stored record's deletion was due")
	g.Expect(b.counted).To(BeEmpty())
	g.Expect([]int{b.creates, b.updates}).To(Equal([]int{1, 0}), "creates, updates")
}

// A create whose answer is lost (applied, then a timeout) counts nothing
// then, and nothing after: the next decision is on the stored record,
// which writes nothing. (An outcome is counted only on an answered write:
// at most once.)
func TestActLostAnswerCountsAtMostOnce(t *testing.T) {
	b := newActBed(t)
	g := b.g
	b.job("job-1", wrapupv1alpha1.OutcomeSucceeded)
	b.onCreate = func(ctx context.Context, c client.WithWatch, obj client.Object) error {
		g.Expect(c.Create(ctx, obj)).To(Succeed())
		return apierrors.NewTimeoutError("the answer is lost", 1)
	}
	_, err := b.r.Reconcile(b.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b.aw)})
	g.Expect(err).To(HaveOccurred())
	g.Expect(b.record()).NotTo(BeNil())
	b.onCreate = nil
	for _, at := range []time.Duration{time.Second, time.Minute} {
		b.reconcile(at)
	}
	g.Expect([]int{b.creates, b.updates}).To(Equal([]int{1, 0}), "creates, updates")
	g.Expect(len(b.counted)).To(BeNumerically("<=", 1))
}

// A new attempt after a recorded failure clears the outcome by an update
// of the record under the resourceVersion it was read at: the record
// keeps the outcome that was, as history, and the mirror goes. An update
// on a record changed since conflicts: nothing is counted or mirrored,
// and the controller looks again. The next outcome replaces the cleared
// one by an update, and is counted once.
func TestActClearsByUpdateUnderItsResourceVersion(t *testing.T) {
	b := newActBed(t)
	g := b.g
	failed := util.MakeRecord(b.aw, b.rule, wrapupv1alpha1.OutcomeFailed, actStart.Add(-5*time.Minute)).Trigger(0, "job-1").Obj()
	b.store(failed)
	// The AppWrapper controller reset it and made a new attempt.
	aw := b.appWrapper()
	aw.Status.Retries = 1
	aw.Labels = map[string]string{wrapupv1alpha1.OutcomeLabel: "Failed"}
	g.Expect(b.fc.Update(b.ctx, aw)).To(Succeed())
	b.job("job-2", "")
	stored := b.record()

	// First, the record changes between the read and the update.
	b.onUpdate = func(ctx context.Context, c client.WithWatch, obj client.Object) error {
		b.onUpdate = nil
		cur := b.record()
		cur.Labels["someone"] = "else"
		g.Expect(c.Update(ctx, cur)).To(Succeed())
		return c.Update(ctx, obj)
	}
	res := b.reconcile(0)
	g.Expect(res.Requeue).To(BeTrue()) //nolint:staticcheck // the controller's answer to a conflict
	g.Expect(b.updatedOn).To(Equal([]string{stored.ResourceVersion}))
	g.Expect(b.record().Cleared).To(BeNil())
	g.Expect(b.patches).To(BeZero())

	current := b.record()
	b.reconcile(time.Second)
	g.Expect(b.updatedOn).To(Equal([]string{stored.ResourceVersion, current.ResourceVersion}))
	cr := b.record()
	g.Expect(cr.Cleared).NotTo(BeNil())
	g.Expect(cr.Outcome).To(Equal(wrapupv1alpha1.OutcomeFailed), "kept as history")
	g.Expect(recordedTriggers(cr)).To(Equal([]simRecTrig{{index: 0, uid: "job-1"}}))
	g.Expect(b.appWrapper().Labels).NotTo(HaveKey(wrapupv1alpha1.OutcomeLabel))
	g.Expect(b.counted).To(BeEmpty())
	g.Expect(b.creates).To(BeZero())

	b.job("job-2", wrapupv1alpha1.OutcomeSucceeded)
	b.reconcile(time.Minute)
	cr = b.record()
	g.Expect(cr.Cleared).To(BeNil())
	g.Expect(cr.Outcome).To(Equal(wrapupv1alpha1.OutcomeSucceeded))
	g.Expect(recordedTriggers(cr)).To(Equal([]simRecTrig{{index: 0, uid: "job-2"}}))
	g.Expect(cr.FinishedAt.Time).To(BeTemporally("==", actStart.Add(time.Minute)))
	g.Expect(b.counted).To(Equal([]string{"jobs/Succeeded"}))
	g.Expect([]int{b.creates, b.updates}).To(Equal([]int{0, 3}), "creates, updates")
	g.Expect(b.appWrapper().Labels).To(HaveKeyWithValue(wrapupv1alpha1.OutcomeLabel, "Succeeded"))
	b.reconcile(2 * time.Minute)
	g.Expect(b.counted).To(HaveLen(1))
}

// A change of the action in force after a run was recorded (here
// UpdateStatus turned to DeleteAll 60 s) is stamped by an update of the
// record, which counts nothing and mirrors nothing: the deletion is due
// 60 s after the controller saw the change, not 60 s after the run
// finished (long past).
func TestActRestampCountsNothing(t *testing.T) {
	b := newActBed(t)
	g := b.g
	b.job("job-1", wrapupv1alpha1.OutcomeSucceeded)
	was := b.rule.DeepCopy()
	was.Spec.OnSuccess = wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionUpdateStatus}
	b.store(util.MakeRecord(b.aw, was, wrapupv1alpha1.OutcomeSucceeded, actStart.Add(-time.Hour)).Trigger(0, "job-1").Obj())
	rule := &wrapupv1alpha1.CompletionRule{}
	g.Expect(b.fc.Get(b.ctx, client.ObjectKeyFromObject(b.rule), rule)).To(Succeed())
	rule.Spec.OnSuccess = wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll, TTLSecondsAfterFinished: ptr.To[int32](60)}
	g.Expect(b.fc.Update(b.ctx, rule)).To(Succeed())

	res := b.reconcile(0)
	g.Expect(res.RequeueAfter).To(Equal(60 * time.Second))
	cr := b.record()
	g.Expect(cr.Action.Action).To(Equal(wrapupv1alpha1.ActionDeleteAll))
	g.Expect(cr.Action.DeleteAfter).NotTo(BeNil())
	g.Expect(cr.Action.DeleteAfter.Time).To(BeTemporally("==", actStart.Add(60*time.Second)))
	g.Expect(b.counted).To(BeEmpty())
	g.Expect([]int{b.creates, b.updates, b.patches}).To(Equal([]int{0, 1, 0}), "creates, updates, patches")

	b.reconcile(59 * time.Second)
	g.Expect(b.appWrapper()).NotTo(BeNil())
	b.reconcile(60 * time.Second)
	g.Expect(b.appWrapper()).To(BeNil())
	g.Expect(b.counted).To(BeEmpty())
}

// The record is written from the final check's decision, on the rules as
// the API server has them: a cache behind a rule's edit (here its history
// TTL) never writes its retention.
func TestActWritesTheRecordOfTheFreshRules(t *testing.T) {
	b := newActBed(t)
	g := b.g
	b.job("job-1", wrapupv1alpha1.OutcomeSucceeded)
	stale := b.rule.DeepCopy()
	stale.Spec.History.TTLSecondsAfterFinished = ptr.To[int32](30)
	b.r.Cache = interceptor.NewClient(b.fc, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if l, ok := list.(*wrapupv1alpha1.CompletionRuleList); ok {
				l.Items = []wrapupv1alpha1.CompletionRule{*stale.DeepCopy()}
				return nil
			}
			return c.List(ctx, list, opts...)
		},
	})
	b.reconcile(0)
	cr := b.record()
	g.Expect(cr).NotTo(BeNil())
	g.Expect(cr.Retention.TTLSecondsAfterFinished).To(Equal(int32(wrapupv1alpha1.DefaultHistoryTTLSeconds)))
	g.Expect(cr.OwnerReferences).To(BeEmpty())
}

// A tenant's record on the AppWrapper's metadata (every key an earlier
// version read: an outcome, its trigger's UID, its rule, its time, the
// AppWrapper's UID) is not read: on a running trigger, nothing is recorded
// or deleted; and the record written once the trigger finishes is
// wrapup's own (its time and message), whatever the metadata said.
func TestActForgedMetadataChangesNothing(t *testing.T) {
	b := newActBed(t)
	g := b.g
	aw := b.appWrapper()
	forged := &util.AppWrapperWrapper{AppWrapper: *aw}
	forged.Recorded(wrapupv1alpha1.OutcomeSucceeded, actStart.Add(-24*time.Hour), "job-1").RecordedBy("jobs", "batch/Job/bench").
		RecordedOn("aw-uid").RecordedMessage("forged by a tenant")
	g.Expect(b.fc.Update(b.ctx, &forged.AppWrapper)).To(Succeed())
	b.job("job-1", "")
	b.reconcile(0)
	g.Expect(b.record()).To(BeNil())
	g.Expect(b.appWrapper()).NotTo(BeNil())
	g.Expect([]int{b.creates, b.updates, b.patches}).To(Equal([]int{0, 0, 0}), "creates, updates, patches")

	b.job("job-1", wrapupv1alpha1.OutcomeFailed)
	aw = b.appWrapper()
	aw.Status.Phase = awv1beta2.AppWrapperFailed
	g.Expect(b.fc.Update(b.ctx, aw)).To(Succeed())
	b.reconcile(time.Minute)
	cr := b.record()
	g.Expect(cr).NotTo(BeNil())
	g.Expect(cr.Outcome).To(Equal(wrapupv1alpha1.OutcomeFailed))
	g.Expect(cr.FinishedAt.Time).To(BeTemporally("==", actStart.Add(time.Minute)))
	g.Expect(cr.Message).NotTo(ContainSubstring("forged"))
	g.Expect(b.appWrapper().Labels).To(HaveKeyWithValue(wrapupv1alpha1.OutcomeLabel, "Failed"))
	g.Expect(b.counted).To(Equal([]string{"jobs/Failed"}))
}

var errQuota = errors.New("exceeded quota: count/completionrecords.wrapup.dev")

// A record write refused (a quota, an outage) deletes nothing: the run's
// memory is its record, and the controller tries again.
func TestActDeletesNothingWithoutTheRecord(t *testing.T) {
	b := newActBed(t, func(r *wrapupv1alpha1.CompletionRule) {
		r.Spec.OnSuccess.TTLSecondsAfterFinished = ptr.To[int32](0)
	})
	g := b.g
	b.job("job-1", wrapupv1alpha1.OutcomeSucceeded)
	b.onCreate = func(context.Context, client.WithWatch, client.Object) error { return errQuota }
	for _, at := range []time.Duration{0, time.Minute, time.Hour} {
		b.clock.SetTime(actStart.Add(at))
		_, err := b.r.Reconcile(b.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b.aw)})
		g.Expect(err).To(MatchError(ContainSubstring(errQuota.Error())))
		g.Expect(b.appWrapper()).NotTo(BeNil())
	}
	g.Expect(b.counted).To(BeEmpty())
	b.onCreate = nil
	b.reconcile(2 * time.Hour)
	g.Expect(b.appWrapper()).To(BeNil())
	g.Expect(b.counted).To(Equal([]string{"jobs/Succeeded"}))
}

// A failure recorded under a rule of one component (the RayJob, whose
// failure the AppWrapper controller does not see, final once the
// AppWrapper stayed Running past its grace); since, a rule of another
// component (the Job) wins, and Kueue preempted the AppWrapper and
// admitted it again: its controller re-created every component (the
// RayJob has a new object; status.retries did not move, as no reset was
// made). That is a new attempt, as it is under the rule that recorded the
// failure (the recorded component's new object): the failure is not the
// new attempt's, and the new attempt is not deleted on it.
func TestActReadmissionAfterAFailureUnderAnotherRule(t *testing.T) {
	b := newActBed(t)
	g := b.g
	aw := b.appWrapper()
	aw.Spec.Components = append(aw.Spec.Components, jobComponent(t, "ray.io/v1", "RayJob", "ray"))
	g.Expect(b.fc.Update(b.ctx, aw)).To(Succeed())
	rays := &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: "rays", UID: "rays-uid"},
		Spec: wrapupv1alpha1.CompletionRuleSpec{Trigger: wrapupv1alpha1.TriggerSpec{APIGroup: "ray.io", Kind: "RayJob"},
			OnFailure: wrapupv1alpha1.ActionSpec{Action: wrapupv1alpha1.ActionDeleteAll, TTLSecondsAfterFinished: ptr.To[int32](300)}}}
	cr := util.MakeRecord(aw, rays, wrapupv1alpha1.OutcomeFailed, actStart.Add(-time.Hour)).Trigger(1, "ray-1").Obj()
	cr.AppWrapper.DeployedAt = &metav1.Time{Time: actStart.Add(-2 * time.Hour)}
	b.store(cr)
	// Re-admitted: the AppWrapper controller deployed the components again
	// (its ResourcesDeployed condition True since, on Resuming), and both
	// have new objects, running.
	aw = b.appWrapper()
	aw.Status.Conditions = append(aw.Status.Conditions, metav1.Condition{Type: string(awv1beta2.ResourcesDeployed), Status: metav1.ConditionTrue,
		Reason: string(awv1beta2.AppWrapperResuming), LastTransitionTime: metav1.NewTime(actStart.Add(-time.Minute))})
	g.Expect(b.fc.Update(b.ctx, aw)).To(Succeed())
	b.job("job-2", "")
	ray := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayJob",
		"status": map[string]any{"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}}}
	ray.SetName("ray")
	ray.SetNamespace("ns")
	ray.SetUID("ray-2")
	ray.SetLabels(map[string]string{awv1beta2.AppWrapperLabel: "run"})
	ray.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: awv1beta2.GroupVersion.String(), Kind: "AppWrapper", Name: "run", UID: "aw-uid", Controller: ptr.To(true)}})
	b.jobs["RayJob.ray.io/ns/ray"] = ray
	for _, at := range []time.Duration{0, 300 * time.Second, time.Hour} {
		b.reconcile(at)
		cr := b.record()
		g.Expect(b.appWrapper()).NotTo(BeNil(), "%s after the re-admission: the new attempt deleted on the failure before it (record %s by %s, cleared %v)",
			at, cr.Outcome, cr.Rule, cr.Cleared != nil)
	}
}

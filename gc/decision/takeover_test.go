package decision

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/utils/ptr"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/util"
)

// TestPreviousVersionRecordDecodes: the previous version (3768e4a,
// gc/decision/history.go, CompletionRecordOf) wrote action.deleteAfter of
// every DeleteAll record as a metav1.Time, to the second
// ("2026-12-01T13:00:00Z"). The API server keeps it as written (the CRD
// says format date-time for both). Every reader of this version (the
// manager's CompletionRecord informer, the final check's APIReader,
// kubectl wrapup) decodes through the scheme's codec into a MicroTime,
// which accepts only six fraction digits: the list of the informer fails
// as a whole, so the cache never syncs, and no AppWrapper is decided.
func TestPreviousVersionRecordDecodes(t *testing.T) {
	// The JSON of a record of the previous version, as it marshalled it.
	old := struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		AppWrapper struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"appWrapper"`
		Rule       string           `json:"rule"`
		Outcome    string           `json:"outcome"`
		FinishedAt metav1.MicroTime `json:"finishedAt"`
		Action     struct {
			Action                  string       `json:"action"`
			TTLSecondsAfterFinished *int32       `json:"ttlSecondsAfterFinished,omitempty"`
			DeleteAfter             *metav1.Time `json:"deleteAfter,omitempty"`
		} `json:"action"`
		Retention wrapupv1alpha1.RecordRetention `json:"retention"`
	}{APIVersion: wrapupv1alpha1.GroupVersion.String(), Kind: "CompletionRecord", Rule: "jobs", Outcome: "Succeeded",
		FinishedAt: metav1.NewMicroTime(now)}
	old.Metadata.Name, old.Metadata.Namespace = "run-0123abcd", "ns"
	old.AppWrapper.Name, old.AppWrapper.UID = "run", string(awUID)
	old.Action.Action, old.Action.TTLSecondsAfterFinished = "DeleteAll", ptr.To(int32(3600))
	old.Action.DeleteAfter = ptr.To(metav1.NewTime(now.Add(time.Hour)))
	old.Retention = wrapupv1alpha1.RecordRetention{TTLSecondsAfterFinished: 604800, LimitPerNamespace: 100}

	scheme := runtime.NewScheme()
	if err := wrapupv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(scheme)
	b, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	var cr wrapupv1alpha1.CompletionRecord
	if _, _, err := codecs.UniversalDeserializer().Decode(b, nil, &cr); err != nil {
		t.Fatalf("a CompletionRecord of the previous version (%s) does not decode: %v", b, err)
	}
	if cr.Action.DeleteAfter == nil || cr.Action.DeleteAfter.Time.Before(now.Add(time.Hour)) {
		t.Errorf("deleteAfter %v, want %s at the earliest", cr.Action.DeleteAfter, now.Add(time.Hour))
	}
}

// TestTakeoverOfARunKeptPastItsDue: the run was recorded by
// rule jobs (DeleteAll after an hour) ten days ago; then nothing deleted
// it: no rule selected it any more (here: jobs deleted; the same holds
// for a selector narrowed, the AppWrapper relabelled, or
// wrapup.dev/ignore set). None of those states is stamped, so the record
// still holds jobs' stamp, due ten days ago. Today an administrator adds
// a catch-all rule cleanup. A cleanup with a TTL of half an hour takes the
// run over from now (now + 30m); the same rule with a TTL of two hours
// deletes it at once, because its natural due (finish + 2h) is "not
// before" the stamped one: a longer TTL deletes sooner, and a run kept
// for days would be deleted the instant another rule takes it over. The
// change is seen now: not due before now + the TTL.
func TestTakeoverOfARunKeptPastItsDue(t *testing.T) {
	finished := now.Add(-10 * day)
	recordedBy := jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 3600).Obj()
	for _, ttl := range []time.Duration{30 * time.Minute, 2 * time.Hour} {
		cleanup := util.MakeRule("cleanup").UID("uid-cleanup").TriggerKind("batch", "Job", "").Priority(-10).
			OnSuccess(wrapupv1alpha1.ActionDeleteAll, int32(ttl/time.Second)).Obj()
		aw := appWrapper().Obj()
		cr := util.MakeRecord(aw, recordedBy, wrapupv1alpha1.OutcomeSucceeded, finished).Trigger(jobRef.Index, jobUID).ResourceVersion("5").Obj()
		in := withRecord(input(t, aw, trigger(bench(jobUID).Complete(finished)), cleanup), cr)
		d := Decide(context.Background(), in)
		if d.Verdict == VerdictDelete || d.DueAt.Before(now.Add(ttl)) {
			t.Errorf("cleanup (TTL %s) takes over a run kept ten days past jobs' due: %s due %s, want due %s at the earliest: %s",
				ttl, d.Verdict, d.DueAt, now.Add(ttl), d.Reason)
		}
	}
}

// TestRetryUnderAnotherComponentIsANewAttempt: rule pods decided a
// failure of the Pod worker (component 2) an hour ago, final by the
// grace (the AppWrapper stayed Running). Since, rule jobs (component 1)
// wins, and the AppWrapper controller made a new attempt (status.retries
// 1, Running again, the Job bench re-created with a new UID, running).
// Under pods the re-created Pod would clear the failure (a new attempt is
// evaluated afresh); under jobs no recorded trigger is among its
// candidates, the recorded failure stands, and the retry in progress is
// deleted: the failure defeats the AppWrapper controller's retry (DESIGN
// section 2).
func TestRetryUnderAnotherComponentIsANewAttempt(t *testing.T) {
	pods := util.MakeRule("pods").UID("uid-pods").TriggerKind("", "Pod", "").Obj()
	aw := runWith(util.MakeObject("batch/v1", "Job", "bench").Obj(), util.MakeObject("v1", "Pod", "worker").Obj()).Retries(1).Obj()
	cr := util.MakeRecord(aw, pods, wrapupv1alpha1.OutcomeFailed, now.Add(-time.Hour)).Trigger(2, "pod-uid-1").ResourceVersion("5").Obj()
	in := withRecord(input(t, aw, trigger(bench(jobUID2)), jobs().Obj()), cr)
	d := Decide(context.Background(), in)
	if d.Verdict == VerdictDelete || d.Verdict == VerdictDeleteAfterTTL {
		t.Errorf("a new attempt of the AppWrapper controller (retries 1, its trigger running) after a recorded failure: %s: %s", d.Verdict, d.Reason)
	}
}

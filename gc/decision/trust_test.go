package decision

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/util"
)

// An AppWrapper's labels and annotations are its tenant's to write: the
// wrapup.dev/* ones are a mirror of the run's CompletionRecord for people,
// and an earlier version's record (trigger-uid, trigger-ref, triggers,
// appwrapper-uid) is no record at all. Whatever a tenant writes there,
// every decision is the one on the AppWrapper without it. (The tenant's
// own switches, wrapup.dev/ignore and the trigger annotation, are not
// among these keys: they are the user's word.)

// tenantLabels and tenantAnnotations are the wrapup.dev/* keys a tenant may
// write on an AppWrapper that a decision must not read: the mirror, the
// record an earlier version kept, and the labels wrapup puts on a record.
var (
	tenantLabels      = []string{wrapupv1alpha1.OutcomeLabel, wrapupv1alpha1.RecordAppWrapperLabel, wrapupv1alpha1.RecordRuleLabel}
	tenantAnnotations = append([]string{wrapupv1alpha1.RuleAnnotation, wrapupv1alpha1.FinishedAtAnnotation, wrapupv1alpha1.MessageAnnotation}, util.LegacyRecordKeys...)
)

// forgedValues are the values a tenant may write under a key.
func forgedValues(key string) []string {
	switch key {
	case wrapupv1alpha1.OutcomeLabel:
		return []string{"Succeeded", "Failed", "", "Running"}
	case wrapupv1alpha1.FinishedAtAnnotation:
		return []string{now.Add(-30 * day).Format(time.RFC3339), now.Add(-time.Hour).Format(time.RFC3339Nano), now.Format(time.RFC3339),
			now.Add(time.Hour).Format(time.RFC3339), "2026-12-01T11:59:59.123456789Z", "yesterday", ""}
	case wrapupv1alpha1.RuleAnnotation: // and RecordRuleLabel, the same key
		return []string{"jobs", "harness", "keep-forever", "", strings.Repeat("r", 300)}
	case wrapupv1alpha1.MessageAnnotation:
		return []string{"", "all good", strings.Repeat("m", 5000)}
	case wrapupv1alpha1.RecordAppWrapperLabel:
		return []string{"run", "victim", ""}
	case "wrapup.dev/trigger-uid":
		return []string{string(jobUID), string(jobUID2), string(hUID(0, 0)), string(hUID(1, 0)), "", "x"}
	case "wrapup.dev/trigger-ref":
		return []string{jobRef.String(), "batch/Job/other", "/Pod/x", harnessRef(0).String(), "batch/Job/gen-*", ""}
	case "wrapup.dev/triggers":
		return []string{"All:1=" + string(hUID(0, 0)), "Any:2=" + string(hUID(1, 0)), "All:1=" + string(hUID(0, 0)) + ",2=" + string(hUID(1, 0)) + ",3=" + string(hUID(2, 0)),
			"All:1=,2=,3=", "Any:", "garbage"}
	case "wrapup.dev/appwrapper-uid":
		return []string{string(awUID), "another-aw-uid", ""}
	}
	panic("no values for " + key)
}

// rewrite sets every key of the mirror and of the legacy record on aw to a
// value r draws, or removes it.
func rewrite(aw *awv1beta2.AppWrapper, r *rand.Rand) {
	if aw.Labels == nil {
		aw.Labels = map[string]string{}
	}
	if aw.Annotations == nil {
		aw.Annotations = map[string]string{}
	}
	set := func(m map[string]string, k string) {
		vs := forgedValues(k)
		if i := r.Intn(len(vs) + 1); i < len(vs) {
			m[k] = vs[i]
		} else {
			delete(m, k)
		}
	}
	for _, k := range tenantLabels {
		set(aw.Labels, k)
	}
	for _, k := range tenantAnnotations {
		set(aw.Annotations, k)
	}
}

// forgery is a shape of record a tenant writes on the AppWrapper's
// metadata.
type forgery struct {
	name  string
	apply func(w *util.AppWrapperWrapper) *util.AppWrapperWrapper
}

var forgeries = []forgery{
	{"a partial All record naming only the candidate that finished", func(w *util.AppWrapperWrapper) *util.AppWrapperWrapper {
		return w.Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute), hUID(0, 0)).RecordedBy("harness", harnessRef(0).String()).RecordedOn(awUID).
			RecordedCandidates(wrapupv1alpha1.TriggerPolicyAll, util.RecordedCandidate{Index: 1, UID: hUID(0, 0)})
	}},
	{"a partial Any failure naming one candidate", func(w *util.AppWrapperWrapper) *util.AppWrapperWrapper {
		return w.Recorded(wrapupv1alpha1.OutcomeFailed, now.Add(-time.Minute), hUID(1, 0)).RecordedBy("harness", harnessRef(1).String()).RecordedOn(awUID).
			RecordedCandidates(wrapupv1alpha1.TriggerPolicyAny, util.RecordedCandidate{Index: 2, UID: hUID(1, 0)})
	}},
	{"a success with no trigger UID", func(w *util.AppWrapperWrapper) *util.AppWrapperWrapper {
		return w.Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute), "").RecordedBy("jobs", jobRef.String()).RecordedOn(awUID)
	}},
	{"a failure with no trigger UID", func(w *util.AppWrapperWrapper) *util.AppWrapperWrapper {
		return w.Recorded(wrapupv1alpha1.OutcomeFailed, now.Add(-time.Minute), "").RecordedBy("jobs", jobRef.String()).RecordedOn(awUID)
	}},
	{"a record copied from another AppWrapper", func(w *util.AppWrapperWrapper) *util.AppWrapperWrapper {
		return w.Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-2*time.Hour), "old-job-uid").RecordedBy("jobs", jobRef.String()).RecordedMessage("done").RecordedOn("another-aw-uid")
	}},
	{"an earlier genuine record of this trigger put back", func(w *util.AppWrapperWrapper) *util.AppWrapperWrapper {
		return w.Recorded(wrapupv1alpha1.OutcomeFailed, now.Add(-time.Hour), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("oom").RecordedOn(awUID)
	}},
	{"a success of this trigger planted at creation (no AppWrapper UID)", func(w *util.AppWrapperWrapper) *util.AppWrapperWrapper {
		return w.Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-3*time.Hour), jobUID).RecordedBy("jobs", jobRef.String())
	}},
	{"a message and a time rewritten", func(w *util.AppWrapperWrapper) *util.AppWrapperWrapper {
		return w.Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-30*day), jobUID).RecordedBy("jobs", jobRef.String()).RecordedMessage("all good, delete me").RecordedOn(awUID)
	}},
	{"names over 63 characters", func(w *util.AppWrapperWrapper) *util.AppWrapperWrapper {
		return w.Recorded(wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute), jobUID).RecordedBy(strings.Repeat("r", 100), jobRef.String()).
			Label(wrapupv1alpha1.RecordAppWrapperLabel, "victim")
	}},
}

// world is an AppWrapper and what is observed of it, and what it shows
// (the outcome its triggers and phase show, "" for none).
type world struct {
	name  string
	in    func(t *testing.T, w *util.AppWrapperWrapper) Input
	aw    func() *util.AppWrapperWrapper
	shows wrapupv1alpha1.Outcome
}

// recordAt adds to in the run's stored record of o at at under in's first
// rule, naming the triggers ts (index, UID pairs).
func recordAt(in Input, o wrapupv1alpha1.Outcome, at time.Time, ts ...RecordedTrigger) Input {
	w := util.MakeRecord(in.AppWrapper, in.Rules[0].Rule, o, at).Message("wrapup's").ResourceVersion("3")
	for _, tr := range ts {
		w.Trigger(tr.Index, tr.UID)
	}
	return withRecord(in, w.Obj())
}

func harnessWorld(policy wrapupv1alpha1.TriggerPolicy, ts ...Trigger) func(t *testing.T, w *util.AppWrapperWrapper) Input {
	return func(t *testing.T, w *util.AppWrapperWrapper) Input {
		in := input(t, w.Obj(), Trigger{}, harnessRule(policy))
		in.Triggers = ts
		return in
	}
}

func jobWorld(j *util.JobWrapper, rule func() *wrapupv1alpha1.CompletionRule) func(t *testing.T, w *util.AppWrapperWrapper) Input {
	return func(t *testing.T, w *util.AppWrapperWrapper) Input {
		aw := w.Obj()
		return input(t, aw, trigger(j), rule())
	}
}

func ttl300() *wrapupv1alpha1.CompletionRule {
	return jobs().OnSuccess(wrapupv1alpha1.ActionDeleteAll, 300).OnFailure(wrapupv1alpha1.ActionDeleteAll, 300).Obj()
}

// worlds without a record, and what they show.
var freshWorlds = []world{
	{"the trigger running", jobWorld(bench(jobUID), ttl300), appWrapper, ""},
	{"the trigger complete", jobWorld(bench(jobUID).Complete(now), ttl300), appWrapper, wrapupv1alpha1.OutcomeSucceeded},
	{"the trigger failed, not final yet", jobWorld(bench(jobUID).Failed(now), ttl300), appWrapper, ""},
	{"the trigger failed for good", func(t *testing.T, w *util.AppWrapperWrapper) Input {
		in := input(t, w.Obj(), trigger(bench(jobUID).Failed(now)), ttl300())
		in.FailureSeen = FailureSeen{TriggerUID: jobUID, At: now.Add(-time.Hour)}
		return in
	}, appWrapper, wrapupv1alpha1.OutcomeFailed},
	{"a new attempt's trigger running", jobWorld(bench(jobUID2), ttl300), appWrapper, ""},
	{"the AppWrapper suspended", func(t *testing.T, w *util.AppWrapperWrapper) Input {
		return input(t, w.Obj(), Trigger{}, ttl300())
	}, func() *util.AppWrapperWrapper { return appWrapper().Phase(awv1beta2.AppWrapperSuspended).Suspend(true) }, ""},
	{"the AppWrapper resetting", func(t *testing.T, w *util.AppWrapperWrapper) Input {
		return input(t, w.Obj(), Trigger{Ref: jobRef, State: TriggerAbsent}, ttl300())
	}, func() *util.AppWrapperWrapper { return appWrapper().Phase(awv1beta2.AppWrapperResetting).Retries(1) }, ""},
	{"the AppWrapper Failed, its trigger gone", func(t *testing.T, w *util.AppWrapperWrapper) Input {
		return input(t, w.Obj(), Trigger{Ref: jobRef, State: TriggerAbsent}, ttl300())
	}, func() *util.AppWrapperWrapper { return appWrapper().Phase(awv1beta2.AppWrapperFailed) }, wrapupv1alpha1.OutcomeFailed},
	{"All: one candidate of three complete", harnessWorld(wrapupv1alpha1.TriggerPolicyAll, candidate(hjob(0, 0).Complete(now)), candidate(hjob(1, 0)), candidate(hjob(2, 0))),
		func() *util.AppWrapperWrapper { return harnessAW(3) }, ""},
	{"All: every candidate complete", harnessWorld(wrapupv1alpha1.TriggerPolicyAll, candidate(hjob(0, 0).Complete(now)), candidate(hjob(1, 0).Complete(now)), candidate(hjob(2, 0).Complete(now))),
		func() *util.AppWrapperWrapper { return harnessAW(3) }, wrapupv1alpha1.OutcomeSucceeded},
	{"Any: one candidate of three failed", harnessWorld(wrapupv1alpha1.TriggerPolicyAny, candidate(hjob(0, 0)), candidate(hjob(1, 0).Failed(now)), candidate(hjob(2, 0))),
		func() *util.AppWrapperWrapper { return harnessAW(3) }, ""},
	{"Any: one candidate of three complete", harnessWorld(wrapupv1alpha1.TriggerPolicyAny, candidate(hjob(0, 0)), candidate(hjob(1, 0).Complete(now)), candidate(hjob(2, 0))),
		func() *util.AppWrapperWrapper { return harnessAW(3) }, wrapupv1alpha1.OutcomeSucceeded},
	{"a name over 63 characters, the trigger running", func(t *testing.T, w *util.AppWrapperWrapper) Input {
		aw := w.Obj()
		return input(t, aw, trigger(util.MakeJob("bench").OwnedBy(aw).UID(jobUID)), ttl300())
	}, longRun, ""},
	{"a name over 63 characters, the trigger complete", func(t *testing.T, w *util.AppWrapperWrapper) Input {
		aw := w.Obj()
		return input(t, aw, trigger(util.MakeJob("bench").OwnedBy(aw).UID(jobUID).Complete(now)), ttl300())
	}, longRun, wrapupv1alpha1.OutcomeSucceeded},
}

// longRun is run under a name too long for a label value.
func longRun() *util.AppWrapperWrapper {
	w := appWrapper()
	w.Name = strings.Repeat("run", 30)
	return w
}

// recordedWorlds are worlds with the run's CompletionRecord.
var recordedWorlds = []world{
	{"a recorded success, the trigger complete", func(t *testing.T, w *util.AppWrapperWrapper) Input {
		return recordAt(jobWorld(bench(jobUID).Complete(now), ttl300)(t, w), wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute), RecordedTrigger{1, jobUID})
	}, appWrapper, wrapupv1alpha1.OutcomeSucceeded},
	{"a recorded success, its trigger running again", func(t *testing.T, w *util.AppWrapperWrapper) Input {
		return recordAt(jobWorld(bench(jobUID), ttl300)(t, w), wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute), RecordedTrigger{1, jobUID})
	}, appWrapper, ""},
	{"a recorded failure, a new attempt running", func(t *testing.T, w *util.AppWrapperWrapper) Input {
		return recordAt(jobWorld(bench(jobUID2), ttl300)(t, w), wrapupv1alpha1.OutcomeFailed, now.Add(-time.Minute), RecordedTrigger{1, jobUID})
	}, appWrapper, ""},
	{"a recorded failure, the trigger failed", func(t *testing.T, w *util.AppWrapperWrapper) Input {
		return recordAt(jobWorld(bench(jobUID).Failed(now), ttl300)(t, w), wrapupv1alpha1.OutcomeFailed, now.Add(-10*time.Minute), RecordedTrigger{1, jobUID})
	}, appWrapper, wrapupv1alpha1.OutcomeFailed},
	{"a recorded success, the AppWrapper suspended", func(t *testing.T, w *util.AppWrapperWrapper) Input {
		return recordAt(input(t, w.Obj(), Trigger{}, ttl300()), wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute), RecordedTrigger{1, jobUID})
	}, func() *util.AppWrapperWrapper { return appWrapper().Phase(awv1beta2.AppWrapperSuspended).Suspend(true) }, wrapupv1alpha1.OutcomeSucceeded},
	{"a recorded failure, held for debugging", func(t *testing.T, w *util.AppWrapperWrapper) Input {
		in := recordAt(input(t, w.Obj(), Trigger{Ref: jobRef, State: TriggerAbsent}, ttl300()), wrapupv1alpha1.OutcomeFailed, now.Add(-5*time.Minute), RecordedTrigger{1, jobUID})
		in.HoldStart = now.Add(-4 * time.Minute)
		return in
	}, func() *util.AppWrapperWrapper {
		return appWrapper().Phase(awv1beta2.AppWrapperFailed).Annotation(awv1beta2.DeletionOnFailureGracePeriodAnnotation, "10m").
			Condition(awv1beta2.DeletingResources, metav1.ConditionFalse, "DeletionPaused", now.Add(-time.Minute))
	}, wrapupv1alpha1.OutcomeFailed},
	{"All: a recorded success of every candidate", func(t *testing.T, w *util.AppWrapperWrapper) Input {
		in := harnessWorld(wrapupv1alpha1.TriggerPolicyAll, candidate(hjob(0, 0).Complete(now)), candidate(hjob(1, 0).Complete(now)), candidate(hjob(2, 0).Complete(now)))(t, w)
		return recordAt(in, wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute), decider(0, 0), decider(1, 0), decider(2, 0))
	}, func() *util.AppWrapperWrapper { return harnessAW(3) }, wrapupv1alpha1.OutcomeSucceeded},
	{"All: a recorded failure of one candidate, the others running", func(t *testing.T, w *util.AppWrapperWrapper) Input {
		in := harnessWorld(wrapupv1alpha1.TriggerPolicyAll, candidate(hjob(0, 0)), candidate(hjob(1, 0).Failed(now)), candidate(hjob(2, 0)))(t, w)
		return recordAt(in, wrapupv1alpha1.OutcomeFailed, now.Add(-time.Minute), decider(1, 0))
	}, func() *util.AppWrapperWrapper { return harnessAW(3) }, wrapupv1alpha1.OutcomeFailed},
	{"Any: a recorded success of one candidate, the others running", func(t *testing.T, w *util.AppWrapperWrapper) Input {
		in := harnessWorld(wrapupv1alpha1.TriggerPolicyAny, candidate(hjob(0, 0)), candidate(hjob(1, 0).Complete(now)), candidate(hjob(2, 0)))(t, w)
		return recordAt(in, wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute), decider(1, 0))
	}, func() *util.AppWrapperWrapper { return harnessAW(3) }, wrapupv1alpha1.OutcomeSucceeded},
	{"a name over 63 characters, a recorded success", func(t *testing.T, w *util.AppWrapperWrapper) Input {
		aw := w.Obj()
		in := input(t, aw, trigger(util.MakeJob("bench").OwnedBy(aw).UID(jobUID).Complete(now)), ttl300())
		return recordAt(in, wrapupv1alpha1.OutcomeSucceeded, now.Add(-time.Minute), RecordedTrigger{1, jobUID})
	}, longRun, wrapupv1alpha1.OutcomeSucceeded},
}

// timeless is d without what the decision measured of itself (how long
// its evaluations took), which no decision reads.
func timeless(d Decision) Decision {
	if d.Evaluation != nil {
		e := *d.Evaluation
		e.Took = 0
		d.Evaluation = &e
	}
	cs := make([]Candidate, len(d.Candidates))
	copy(cs, d.Candidates)
	for i := range cs {
		if cs[i].Evaluation != nil {
			e := *cs[i].Evaluation
			e.Took = 0
			cs[i].Evaluation = &e
		}
	}
	if d.Candidates != nil {
		d.Candidates = cs
	}
	return d
}

// TestTenantMetadataChangesNoDecision: for each world, with the run's
// record and without, the decision on the AppWrapper with its mirror and
// legacy keys rewritten (each shape of forgery, then random values) is the
// decision on the clean AppWrapper: verdict, steps, the CompletionRecord
// to write, what is remembered, and why.
func TestTenantMetadataChangesNoDecision(t *testing.T) {
	worlds := append(append([]world{}, recordedWorlds...), freshWorlds...)
	r := rand.New(rand.NewSource(48))
	const draws = 60
	for _, w := range worlds {
		t.Run(w.name, func(t *testing.T) {
			clean := timeless(Decide(context.Background(), w.in(t, w.aw())))
			check := func(what string, aw *util.AppWrapperWrapper) {
				t.Helper()
				in := w.in(t, aw)
				got := timeless(Decide(context.Background(), in))
				if !reflect.DeepEqual(got, clean) {
					t.Errorf("%s (labels %v, annotations %v):\n got %s: %s\nwant %s: %s\n%s", what, in.AppWrapper.Labels, in.AppWrapper.Annotations,
						got.Verdict, got.Reason, clean.Verdict, clean.Reason, firstDifference(got, clean))
				}
			}
			for _, f := range forgeries {
				check(f.name, f.apply(w.aw()))
			}
			for i := range draws {
				aw := w.aw()
				rewrite(aw.Obj(), r)
				check(fmt.Sprintf("draw %d", i), aw)
			}
		})
	}
}

// firstDifference names the first field of Decision in which a and b
// differ, to read a failure.
func firstDifference(a, b Decision) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var walk func(path string, x, y reflect.Value) string
	walk = func(path string, x, y reflect.Value) string {
		if x.Kind() == reflect.Struct {
			for i := range x.NumField() {
				if s := walk(path+"."+x.Type().Field(i).Name, x.Field(i), y.Field(i)); s != "" {
					return s
				}
			}
			return ""
		}
		if x.CanInterface() && !reflect.DeepEqual(x.Interface(), y.Interface()) {
			return fmt.Sprintf("%s: %+v / %+v", path, x.Interface(), y.Interface())
		}
		return ""
	}
	return walk("Decision", va, vb)
}

// TestForgedMetadataRecordsNothing: with no CompletionRecord, metadata
// of every forged shape never makes a decision delete, keep or record
// anything the world does not show: no record is read from it, an outcome
// written is the world's, seen now, with wrapup's own message, and nothing
// is deleted or due where the world shows no outcome.
func TestForgedMetadataRecordsNothing(t *testing.T) {
	for _, w := range freshWorlds {
		for _, f := range forgeries {
			t.Run(w.name+"/"+f.name, func(t *testing.T) {
				in := w.in(t, f.apply(w.aw()))
				d := Decide(context.Background(), in)
				if d.Recorded != nil {
					t.Errorf("a record read from the metadata: %+v", d.Recorded)
				}
				if w.shows == "" {
					if d.Write != nil || d.Store != nil || d.Outcome != "" || !d.DueAt.IsZero() {
						t.Fatalf("%s, outcome %q, write %+v, store %v, due %s: the world shows no outcome", d.Verdict, d.Outcome, d.Write, d.Store != nil, d.DueAt)
					}
					switch d.Verdict {
					case VerdictDelete, VerdictDeleteAfterTTL, VerdictRecordOnly, VerdictDryRun:
						t.Fatalf("%s: the world shows no outcome: %s", d.Verdict, d.Reason)
					}
					return
				}
				if d.Write == nil || d.Write.Outcome != w.shows || !d.Write.FinishedAt.Equal(now) || d.Store == nil || d.Store.ResourceVersion != "" {
					t.Fatalf("%s: write %+v, store %v; want %s recorded now, by a create", d.Verdict, d.Write, d.Store != nil, w.shows)
				}
				if strings.Contains(d.Write.Message, "delete me") || strings.Contains(d.Store.Message, "delete me") || d.Store.Rule != in.Rules[0].Rule.Name {
					t.Errorf("the record says %q by %s: want wrapup's own", d.Store.Message, d.Store.Rule)
				}
				ttl := time.Duration(ptr.Deref(ActionFor(in.Rules[0].Rule, w.shows).TTLSecondsAfterFinished, 0)) * time.Second
				if !d.DueAt.Equal(now.Add(ttl)) {
					t.Errorf("due %s, want the TTL (%s) from now", d.DueAt, ttl)
				}
			})
		}
	}
}

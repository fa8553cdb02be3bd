package gc

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/test/util"
)

// The testdata object is a running benchmark's AppWrapper (a Deployment
// and the Job), as the API server returned it; gc/triggers holds the Job.

func readTestdata(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkCachedAppWrapper reports the heap the AppWrapper cache keeps per
// AppWrapper (B/appwrapper): as decoded, and as CacheOptions keeps it.
func BenchmarkCachedAppWrapper(b *testing.B) {
	data := readTestdata(b, "appwrapper-running.json")
	benchCachedPerObject(b, "B/appwrapper", slimAppWrapper, func(i int) client.Object {
		aw := &awv1beta2.AppWrapper{}
		if err := json.Unmarshal(data, aw); err != nil {
			b.Fatal(err)
		}
		aw.Name = fmt.Sprintf("run-%d", i)
		return aw
	})
}

// benchCachedPerObject reports, as unit, the heap 1000 objects made by
// decode keep each: as decoded, and after the cache transform slim.
func benchCachedPerObject(b *testing.B, unit string, slim toolscache.TransformFunc, decode func(i int) client.Object) {
	for _, tc := range []struct {
		name      string
		transform toolscache.TransformFunc
	}{
		{"decoded", func(o any) (any, error) { return o, nil }},
		{"slim", slim},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var per float64
			for b.Loop() {
				per = util.RetainedPerObject(1000, func(i int) any {
					out, err := tc.transform(decode(i))
					if err != nil {
						b.Fatal(err)
					}
					return out
				})
			}
			b.ReportMetric(per, unit)
		})
	}
}

// BenchmarkCachedCompletionRecord reports the heap the CompletionRecord
// cache keeps per record (B/record): as written for a finished benchmark
// run (a Job trigger with its conditions, a message, the AppWrapper's
// labels), decoded whole, and as CacheOptions keeps it.
func BenchmarkCachedCompletionRecord(b *testing.B) {
	cr := &wrapupv1alpha1.CompletionRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "run-0-0a1b2c3d", UID: "0b4e6a2e-0000-4000-8000-000000000000", ResourceVersion: "123456",
			Labels: map[string]string{"llm-d.ai/role": "benchmark", "llm-d.ai/run-id": "r-17", wrapupv1alpha1.OutcomeLabel: "Succeeded",
				wrapupv1alpha1.RecordAppWrapperLabel: "run-0", wrapupv1alpha1.RecordRuleLabel: "benchmarks"}},
		AppWrapper: wrapupv1alpha1.RecordedAppWrapper{Name: "run-0", UID: "6f1c9a7e-0000-4000-8000-000000000000",
			Labels: map[string]string{"llm-d.ai/role": "benchmark", "llm-d.ai/run-id": "r-17"}},
		Rule: "benchmarks", RuleUID: "3c5d7e9f-0000-4000-8000-000000000000", Policy: wrapupv1alpha1.TriggerPolicyOne,
		Outcome: wrapupv1alpha1.OutcomeSucceeded, Message: "benchmark run-0-bench: 1 succeeded, 0 failed",
		FinishedAt: metav1.NowMicro(),
		Action:     wrapupv1alpha1.RecordedAction{Rule: "benchmarks", RuleUID: "3c5d7e9f-0000-4000-8000-000000000000", Action: wrapupv1alpha1.ActionDeleteAll, TTLSecondsAfterFinished: ptr.To[int32](0), DeleteAfter: ptr.To(metav1.Now())},
		Triggers: []wrapupv1alpha1.RecordedTrigger{{APIVersion: "batch/v1", Kind: "Job", Name: "run-0-bench", UID: "9d2f0b1e-0000-4000-8000-000000000000",
			State: "Succeeded", Decided: true, Conditions: []wrapupv1alpha1.RecordedCondition{
				{Type: "SuccessCriteriaMet", Status: "True", Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods"},
				{Type: "Complete", Status: "True", Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods"}}}},
		Retention: wrapupv1alpha1.RecordRetention{TTLSecondsAfterFinished: wrapupv1alpha1.DefaultHistoryTTLSeconds, LimitPerNamespace: wrapupv1alpha1.DefaultHistoryLimit},
	}
	data, err := json.Marshal(cr)
	if err != nil {
		b.Fatal(err)
	}
	benchCachedPerObject(b, "B/record", slimCompletionRecord, func(i int) client.Object {
		c := &wrapupv1alpha1.CompletionRecord{}
		if err := json.Unmarshal(data, c); err != nil {
			b.Fatal(err)
		}
		c.Name = fmt.Sprintf("run-%d-0a1b2c3d", i)
		return c
	})
}

// TestMemoryHoldsOnlyWhatItMust: an AppWrapper with nothing to remember
// (running, its trigger not done) has no entry, however often it is
// decided on; one whose failure hold started has one until it is
// forgotten. (What a run recorded is its CompletionRecord, never an
// entry here.)
func TestMemoryHoldsOnlyWhatItMust(t *testing.T) {
	var m memory
	key := types.NamespacedName{Namespace: "team-a", Name: "run-0"}
	e := m.take(key)
	e.update("uid-1", decision.Decision{})
	m.settle(key, e)
	if n := m.Len(); n != 0 || e.uid != "uid-1" {
		t.Fatalf("after a decision with nothing to remember: %d entries (want 0), uid %q", n, e.uid)
	}
	hold := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	e.update("uid-1", decision.Decision{Remember: decision.Remember{HoldStart: hold}})
	m.settle(key, e)
	if got := m.take(key); m.Len() != 1 || !got.holdStart.Equal(hold) || got.uid != "uid-1" {
		t.Fatalf("a hold's start is not remembered: %d entries, %+v", m.Len(), got)
	}
	// The same name, another AppWrapper: what was remembered goes.
	e = m.take(key)
	e.update("uid-2", decision.Decision{})
	m.settle(key, e)
	if !e.holdStart.IsZero() || m.Len() != 0 {
		t.Fatalf("an AppWrapper created again under the same name keeps %+v (%d entries)", e, m.Len())
	}
}

// TestMemoryScopedToTheAppWrapper: what is remembered of an AppWrapper
// deleted and created again under the same name is not the new one's
// input: a hold remembered as started for the old one would otherwise
// count for the new one and delete it before its own hold ends.
func TestMemoryScopedToTheAppWrapper(t *testing.T) {
	e := &awMemory{uid: "uid-1", holdStart: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), unreachable: 3, warned: []string{"r\x00m"},
		failure: decision.FailureSeen{TriggerUID: "job-1"}}
	in := decision.Input{FailureSeen: e.failure, HoldStart: e.holdStart, WorkerFailures: e.unreachable, Warned: e.warned}
	same := in
	e.scope("uid-1", &same)
	if same.HoldStart.IsZero() || same.WorkerFailures != 3 || len(same.Warned) != 1 || same.FailureSeen == (decision.FailureSeen{}) {
		t.Errorf("the same AppWrapper: input %+v, want what is remembered", same)
	}
	e.scope("uid-2", &in)
	if !in.HoldStart.IsZero() || in.WorkerFailures != 0 || in.Warned != nil || in.FailureSeen != (decision.FailureSeen{}) {
		t.Errorf("another AppWrapper under the name: input %+v, want nothing remembered of the old one", in)
	}
}

package decision

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/util"
)

// A deletion waits for a CompletionRecord that cannot be written for
// HistoryWriteDeadline after the run finished, or after the deletion was
// due when that is later; never less.
func TestRecordDeadline(t *testing.T) {
	rec := &Record{FinishedAt: now}
	for _, tc := range []struct {
		name string
		due  time.Time
		want time.Time
	}{
		{"no deletion (a record-only outcome)", time.Time{}, now.Add(HistoryWriteDeadline)},
		{"due at once", now, now.Add(HistoryWriteDeadline)},
		{"due an hour after the finish", now.Add(time.Hour), now.Add(time.Hour + HistoryWriteDeadline)},
	} {
		if got := RecordDeadline(rec, tc.due); !got.Equal(tc.want) {
			t.Errorf("%s: deadline %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A record's retention runs from the run's finish; at its end exactly,
// there is nothing left to keep.
func TestRecordExpired(t *testing.T) {
	rec := &Record{FinishedAt: now}
	ret := wrapupv1alpha1.RecordRetention{TTLSecondsAfterFinished: 60}
	if RecordExpired(now.Add(59*time.Second), rec, ret) {
		t.Error("expired a second before its retention ends")
	}
	if !RecordExpired(now.Add(60*time.Second), rec, ret) {
		t.Error("not expired when its retention ends")
	}
}

// The retention is the deciding rule's, never the one the AppWrapper's
// metadata names (which a tenant may write), and that rule's name labels
// the record; a rule that keeps no history keeps none.
func TestHistoryOfTheDecidingRule(t *testing.T) {
	mk := func(name string, ttl int32, disabled bool) Rule {
		return Rule{Rule: util.MakeRule(name).History(wrapupv1alpha1.HistorySpec{TTLSecondsAfterFinished: ptr.To(ttl), Disabled: disabled}).Obj()}
	}
	in := Input{Rules: []Rule{mk("short", 60, false), mk("long", 3600, false), mk("none", 60, true)}}
	rec := &Record{Rule: "short"}
	if rule, ret, keep := HistoryOf(in, Decision{Why: Why{Winner: "long"}}, rec); rule != "long" || !keep || ret.TTLSecondsAfterFinished != 3600 {
		t.Errorf("under the winner long: %q %+v %v; want long's retention", rule, ret, keep)
	}
	if rule, ret, keep := HistoryOf(in, Decision{}, rec); rule != "short" || !keep || ret.TTLSecondsAfterFinished != 60 {
		t.Errorf("with no winner: %q %+v %v; want the record's rule's", rule, ret, keep)
	}
	if _, _, keep := HistoryOf(in, Decision{Why: Why{Winner: "none"}}, rec); keep {
		t.Error("a rule with history disabled keeps a record")
	}
	if _, _, keep := HistoryOf(in, Decision{Why: Why{Winner: "gone"}}, rec); keep {
		t.Error("a rule that is not among the rules keeps a record")
	}
}

// A record's name is the AppWrapper's, cut to fit, and a hash of its UID:
// the same for a retry, another for an AppWrapper created again.
func TestRecordName(t *testing.T) {
	a, b := RecordName("run", "uid-1"), RecordName("run", "uid-2")
	if a != RecordName("run", "uid-1") || a == b || !strings.HasPrefix(a, "run-") {
		t.Errorf("names %q and %q", a, b)
	}
	if long := RecordName(strings.Repeat("x", 300), "uid-1"); len(long) != 253 {
		t.Errorf("a long name gives %d characters, want 253", len(long))
	}
}

// Two stored records are of the same run when they agree to the
// microsecond, which is what the API server keeps of a time.
func TestSameRun(t *testing.T) {
	mk := func(at time.Time) *wrapupv1alpha1.CompletionRecord {
		return &wrapupv1alpha1.CompletionRecord{AppWrapper: wrapupv1alpha1.RecordedAppWrapper{UID: "aw"}, Rule: "r",
			Outcome: wrapupv1alpha1.OutcomeSucceeded, FinishedAt: metav1.NewMicroTime(at)}
	}
	if !SameRun(mk(now), mk(now.Add(300*time.Nanosecond))) {
		t.Error("the same run, read back at the API server's precision, is not the same")
	}
	if SameRun(mk(now), mk(now.Add(time.Millisecond))) {
		t.Error("runs a millisecond apart are the same")
	}
}
